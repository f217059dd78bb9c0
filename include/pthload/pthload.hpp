// pthload: read PyTorch checkpoints without PyTorch or Python. The umbrella header.
#pragma once

#include "pthload/checkpoint.hpp"
#include "pthload/device.hpp"
#include "pthload/dtype.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "pthload/limits.hpp"
#include "pthload/options.hpp"
#include "pthload/records.hpp"
#include "pthload/slice.hpp"
#include "pthload/tensor.hpp"
