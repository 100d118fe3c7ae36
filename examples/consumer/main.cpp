// Built against an installed tensorcast: a small network trained data-parallel in bf16
// autocast with a GradScaler, on a learnable synthetic target. Each rank draws its own
// batches; DistributedDataParallel averages the gradients. Exits 0 only if the loss falls
// by more than half and every rank ends with the same parameters.
#include <tensorcast/dist/ddp.h>
#include <tensorcast/dist/process_group.h>
#include <tensorcast/tensorcast.h>

#include <cstdio>

int main() {
  namespace nn = tc::nn;
  tc::dist::init();  // MPI under mpirun, else a world of one
  const int rank = tc::dist::rank();

  tc::manual_seed(1);  // the same target on every rank
  const tc::Tensor teacher = tc::randn({16, 1});
  tc::manual_seed(100 + static_cast<uint64_t>(rank));  // but each rank's own data
  auto model = nn::Sequential(nn::Linear(16, 32), nn::ReLU(), nn::Linear(32, 1)).ptr();
  tc::dist::DistributedDataParallel ddp(model);  // rank 0's initial parameters everywhere
  tc::optim::AdamW optimizer(model->parameters(), tc::optim::AdamWOptions(1e-2).weight_decay(0.0));
  tc::amp::GradScaler scaler;
  tc::dist::sync_grad_scaler(scaler);  // every rank skips or steps together

  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    const tc::Tensor x = tc::randn({64, 16});
    const tc::Tensor y = tc::sigmoid(tc::matmul(x, teacher));
    optimizer.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, tc::kBFloat16);
      loss = tc::mse_loss(tc::sigmoid(model->forward(x)), y);
    }
    scaler.scale(loss).backward();  // .grad() holds the average over the ranks
    scaler.step(optimizer);
    scaler.update();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }

  bool same = true;  // every rank's parameters equal rank 0's, bit for bit
  for (const tc::Tensor& p : model->parameters()) {
    const std::vector<tc::Tensor> all = tc::dist::all_gather(p);
    for (const tc::Tensor& a : all) same = same && a.to_vector() == all[0].to_vector();
  }
  std::printf("consumer: rank %d of %d: loss %.5f -> %.5f, parameters %s across ranks\n", rank, tc::dist::world_size(),
              first, last, same ? "equal" : "DIFFERENT");
  return last < 0.5 * first && same ? 0 : 1;
}
