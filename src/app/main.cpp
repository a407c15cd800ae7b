// `epq`: run Mixture-of-Experts GGUF models larger than RAM.
#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "app/commands.h"
#include "quant/cpu_features.h"
#include "quant/dot.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"epq: run Mixture-of-Experts GGUF models larger than RAM, paging routed experts from SSD"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    return fmt::format("epq 0.1.0 (dot kernels: {}; this CPU has AVX-512 F/BW/VL/DQ/VNNI: {})", epq::quant::active_kernels().name,
                       epq::quant::cpu_features().avx512_vnni ? "yes" : "no");
  });
  epq::app::add_synth_command(app);
  epq::app::add_inspect_command(app);
  epq::app::add_run_command(app);
  epq::app::add_chat_command(app);
  epq::app::add_tokenize_command(app);
  epq::app::add_perplexity_command(app);
  epq::app::add_plan_command(app);
  epq::app::add_limit_command(app);
  epq::app::add_probe_io_command(app);
  epq::app::add_bench_command(app);
  epq::app::add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const epq::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "epq: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "epq: error: out of memory\n");
    return 1;
  }
  return 0;
}
