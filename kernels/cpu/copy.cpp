// Device-to-device copy on the CPU: memcpy between two buffers. bytes() counts read + write traffic.
#include <cstring>

#include "cpu.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::cpu {
namespace {

class Copy final : public Microkernel {
 public:
  Copy(Backend& b, const CopyCase& c) : backend_(b), c_(c) {}
  [[nodiscard]] std::string_view name() const override { return "copy/memcpy"; }
  void setup() override {
    src_ = DeviceBuffer(backend_, sz(c_.bytes));
    dst_ = DeviceBuffer(backend_, sz(c_.bytes));
    for (std::int64_t i = 0; i < c_.bytes; ++i) src_.as<unsigned char>()[i] = static_cast<unsigned char>(i * 31 + 7);
  }
  [[nodiscard]] Check check() override {
    std::memset(dst_.as<void>(), 0, sz(c_.bytes));
    run();
    Check ch{0, 0, "mismatched bytes"};
    for (std::int64_t i = 0; i < c_.bytes; ++i)
      if (dst_.as<unsigned char>()[i] != src_.as<unsigned char>()[i]) ch.error += 1;
    return ch;
  }
  void run() override { std::memcpy(dst_.as<void>(), src_.as<void>(), sz(c_.bytes)); }
  [[nodiscard]] double flops() const override { return 0; }
  [[nodiscard]] double bytes() const override { return 2.0 * static_cast<double>(c_.bytes); }

 private:
  Backend& backend_;
  CopyCase c_;
  DeviceBuffer src_, dst_;
};

}  // namespace

std::unique_ptr<Microkernel> make_copy(Backend& b, const Case& c) {
  return std::make_unique<Copy>(b, std::get<CopyCase>(c));
}

}  // namespace headroom::kernels::cpu
