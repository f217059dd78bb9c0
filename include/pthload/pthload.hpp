// pthload: read PyTorch checkpoints without PyTorch or Python. The umbrella header.
#pragma once

#include "pthload/error.hpp"
#include "pthload/options.hpp"
#include "pthload/records.hpp"
