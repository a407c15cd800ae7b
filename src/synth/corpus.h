#pragma once
// A short English text the synthesizer learns its BPE merges from, so that synthesized
// vocabularies contain real-looking tokens ("the", " of", "ing").
#include <string_view>

namespace epq::synth {

std::string_view training_corpus();

}  // namespace epq::synth
