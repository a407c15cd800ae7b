// `epq`: run Mixture-of-Experts GGUF models larger than RAM.
#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string>

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
  epq::app::add_replay_command(app);
  epq::app::add_split_command(app);
  // Every failure is one line, "epq: error: ...", and exit status 1; --help and
  // --version print to stdout and exit 0.
  auto error = [](const std::string& message) {
    std::fflush(stdout);
    fmt::print(stderr, "epq: error: {}\n", epq::printable(message, epq::Error::kMaxMessageBytes));
    return 1;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit status (epq limit passes its child's on)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return error(std::string(e.what()) + " (see --help)");
  } catch (const epq::Error& e) {
    return error(e.what());
  } catch (const std::bad_alloc&) {
    return error("out of memory");
  } catch (const std::exception& e) {
    return error(std::string("internal error: ") + e.what());
  }
  return 0;
}
