// Embedding: a lookup table (num_embeddings, embedding_dim), initialized N(0, 1).
#pragma once
#include "tensorcast/nn/module.h"

namespace tc::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TC_ARG(int64_t, num_embeddings);
  TC_ARG(int64_t, embedding_dim);
};

class EmbeddingImpl : public Module {
 public:
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  // indices: int64 of any shape -> (*indices.shape, embedding_dim).
  Tensor forward(const Tensor& indices);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  EmbeddingOptions options;
  Tensor weight;
};
TC_MODULE(Embedding);

}  // namespace tc::nn
