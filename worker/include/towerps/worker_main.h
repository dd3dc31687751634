// WorkerMain: the whole of a training worker, for a registry of models and datasets. A user's
// worker binary is
//
//   int main(int argc, char** argv) {
//     towerps::Registry registry = towerps::StockRegistry();
//     ... registry.AddModel(...), registry.AddDataset(...) ...
//     return towerps::WorkerMain(argc, argv, registry);
//   }
//
// and `towerps-launch --worker-bin PATH` runs it in every mode. It takes every flag of the stock
// towerps-worker (--help lists them), and these queries, which start nothing:
//   --list-models  prints the registered models and datasets
//   --check-job    checks that --model and --dataset are registered and fit each other (the
//                  launcher runs this before it starts any process)
//
// Contract: returns the process exit code: 0 on success, 2 for a bad flag, an unknown name or a
// model and data that do not fit, 1 for any other failure, 128 + N when stopped by signal N
// (SIGINT, SIGTERM: it stops at the next step and lets the chief finish cleanly). Installs
// handlers for SIGINT and SIGTERM; call it once per process, from main. The registry is
// borrowed for the call. When OPENBLAS_CORETYPE is unset and Debian's OpenBLAS took the CPU for
// an older one, it first starts the program again with the faster kernels
// (kernels/cpu/blas_kernels.h): what main did before the call is done twice, so keep it to
// building the registry (processes started by towerps-launch inherit the variable and start once).
#ifndef TOWERPS_WORKER_MAIN_H_
#define TOWERPS_WORKER_MAIN_H_

#include "towerps/registry.h"

namespace towerps {

int WorkerMain(int argc, char** argv, const Registry& registry);

}  // namespace towerps

#endif  // TOWERPS_WORKER_MAIN_H_
