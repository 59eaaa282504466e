// Training: the label-smoothed loss, Adam and the learning-rate schedule of paper §5.
#pragma once

#include "train/adam.hpp"
#include "train/loss.hpp"
