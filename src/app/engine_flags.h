#pragma once
// Command-line flags shared by every command that runs a model.
#include <CLI/CLI.hpp>

#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace epq::app {

void add_engine_flags(CLI::App* command, runtime::EngineOptions& options);
void add_sampler_flags(CLI::App* command, runtime::SamplerOptions& options);

}  // namespace epq::app
