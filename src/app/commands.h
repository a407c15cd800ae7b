#pragma once
// Each `epq` subcommand lives in its own file and registers itself on the root app.
// A subcommand's callback does the work; errors propagate as epq::Error to main().
#include <CLI/CLI.hpp>

namespace epq::app {

void add_synth_command(CLI::App& root);
void add_inspect_command(CLI::App& root);
void add_run_command(CLI::App& root);
void add_tokenize_command(CLI::App& root);
void add_chat_command(CLI::App& root);
void add_perplexity_command(CLI::App& root);
void add_plan_command(CLI::App& root);
void add_limit_command(CLI::App& root);
void add_probe_io_command(CLI::App& root);
void add_bench_command(CLI::App& root);
void add_serve_command(CLI::App& root);
void add_replay_command(CLI::App& root);
void add_split_command(CLI::App& root);

}  // namespace epq::app
