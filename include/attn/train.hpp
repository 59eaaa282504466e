// Training: the label-smoothed loss, Adam and the learning-rate schedule of paper §5, gradient
// clipping, float16's loss scaling and communicators. Data, batching, checkpoints and MPI need SentencePiece,
// nlohmann-json or MPI, so they are included one by one (train/data.hpp, train/batching.hpp,
// train/checkpoint.hpp, train/mpi.hpp).
#pragma once

#include "train/adam.hpp"
#include "train/clip.hpp"
#include "train/communicator.hpp"
#include "train/loss.hpp"
#include "train/loss_scale.hpp"
