// Built when CMake found no MPI (or HEADROOM_ENABLE_MPI is off): `calibrate --mpi` is a clear error.
#include <cstdlib>

#include "headroom/core/error.hpp"
#include "headroom/kernels/mpi.hpp"

namespace headroom::kernels::mpi {

struct Session::Impl {};

bool built() { return false; }

Session::Session() {
  throw Error(
      "--mpi: this build has no MPI support (install an MPI such as libopenmpi-dev and reconfigure); the CPU "
      "backend runs collectives between threads of one process (--ranks), and nccl-tests logs from a cluster "
      "can be read with --ingest");
}
Session::~Session() = default;
const Placement& Session::placement() const {
  static const Placement one;
  return one;
}
void Session::on_root(const std::function<void()>& f) const { f(); }
std::string Session::broadcast(const std::string& text) const { return text; }
bool Session::everywhere(bool ok) const { return ok; }
bool Session::all_failed(double) const { return true; }
void Session::abort(int code) const { std::exit(code); }
std::unique_ptr<Backend> Session::cpu_backend() const { return make_cpu_backend(1); }

}  // namespace headroom::kernels::mpi
