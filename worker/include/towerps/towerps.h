// Everything a user's worker binary needs, in one include. docs/API.md is the guide.
//
//   <towerps/model_builder.h>  describe a network (layers, residual blocks, batch norm)
//   <towerps/layer_options.h>  padding, initializers, activations, LRN and batch-norm options
//   <towerps/dataset.h>        labelled examples in memory, and their preprocessing
//   <towerps/example_stream.h> a split read in order, for data larger than memory
//   <towerps/registry.h>       models and datasets by name; the stock ones
//   <towerps/worker_main.h>    the whole worker process, with every standard flag
//   <towerps/status.h>, <towerps/result.h>  errors as values
//   <towerps/shape.h>          tensor and example shapes
//   <towerps/check.h>          TOWERPS_CHECK for broken invariants
//   <towerps/version.h>        TOWERPS_VERSION_STRING
#ifndef TOWERPS_TOWERPS_H_
#define TOWERPS_TOWERPS_H_

#include "towerps/check.h"
#include "towerps/dataset.h"
#include "towerps/example_stream.h"
#include "towerps/layer_options.h"
#include "towerps/model_builder.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "towerps/shape.h"
#include "towerps/status.h"
#include "towerps/version.h"
#include "towerps/worker_main.h"

#endif  // TOWERPS_TOWERPS_H_
