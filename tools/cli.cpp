#include "cli.hpp"

#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "headroom/estimator/error.hpp"

namespace headroom::cli {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app("headroom: memory and throughput planning for LLM training", "headroom");
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");
  register_calibrate(app, out, err);
  register_comm(app, out);
  register_estimate(app, out);
  register_launch(app, out);
  register_rank(app, out);
  register_mtsl(app, out);
  register_simulate(app, out);
  register_validate(app, out);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them back to front
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << (app.get_subcommands().empty() ? app.help() : app.get_subcommands().front()->help());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const QuietExit& e) {
    return e.code();
  } catch (const CheckFailed& e) {
    err << e.what() << "\n";
    return 1;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace headroom::cli
