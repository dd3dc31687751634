// "stripes": a dataset of this example's own, generated in memory. Each 1x28x28 image is a
// sinusoidal grating at one of four orientations (0, 45, 90 or 135 degrees, the class), with a
// random period and phase and pixel noise. Seeded by the job's --seed: every worker makes the
// same images.
#ifndef CUSTOM_MODEL_STRIPES_H_
#define CUSTOM_MODEL_STRIPES_H_

#include <towerps/registry.h>

towerps::Result<towerps::DataSplits> LoadStripes(const towerps::DataRequest& request);
towerps::Result<towerps::DatasetInfo> ProbeStripes(const towerps::DataRequest& request);

#endif  // CUSTOM_MODEL_STRIPES_H_
