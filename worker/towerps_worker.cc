// towerps-worker: one training worker with the zoo and the stock datasets. Usually started by
// towerps-launch; see <towerps/worker_main.h> for what it does and worker/train/trainer.h for
// how it trains. A user's worker binary is the same three lines with their own registry.
#include "towerps/worker_main.h"

int main(int argc, char** argv) {
  return towerps::WorkerMain(argc, argv, towerps::StockRegistry());
}
