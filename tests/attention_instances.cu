// attention_instances.hpp's entry points for one element type (TP_INSTANCE_TYPE: bf16 or f16;
// two objects, so that the two compile side by side).
#define TP_ATTENTION_INSTANCES_DEFINE
#include "attention_instances.hpp"

TP_ATTENTION_FORWARD_INSTANCES(, tilepipe::TP_INSTANCE_TYPE)
