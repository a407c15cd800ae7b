#include "synth/general_metadata.h"

namespace epq::synth {
namespace {

int file_type(quant::Type expert) {
  switch (expert) {
    case quant::Type::F32: return 0;
    case quant::Type::F16: return 1;
    case quant::Type::Q4_0: return 2;
    case quant::Type::Q4_1: return 3;
    case quant::Type::Q8_0: return 7;
    case quant::Type::Q5_0: return 8;
    case quant::Type::Q5_1: return 9;
    case quant::Type::Q2_K: return 10;
    case quant::Type::Q3_K: return 12;  // Q3_K_M
    case quant::Type::Q4_K: return 15;  // Q4_K_M
    case quant::Type::Q5_K: return 17;  // Q5_K_M
    case quant::Type::Q6_K: return 18;
    case quant::Type::IQ4_NL: return 25;
    case quant::Type::IQ4_XS: return 30;
    case quant::Type::BF16: return 32;
    case quant::Type::MXFP4: return 38;  // MXFP4_MOE
    default: return 15;
  }
}

}  // namespace

void set_general_metadata(gguf::Writer& w, const Options& o) {
  using gguf::Value;
  using gguf::ValueType;
  w.set("general.architecture", Value::string(arch_name(o.arch)));
  w.set("general.type", Value::string("model"));
  w.set("general.name", Value::string(o.name));
  w.set("general.description", Value::string("random weights written by epq synth; not a trained model"));
  w.set("general.quantization_version", Value::integer(ValueType::UINT32, 2));
  w.set("general.file_type", Value::integer(ValueType::UINT32, file_type(o.type_expert)));
}

}  // namespace epq::synth
