/// \file
/// Embedding: a lookup table (num_embeddings, embedding_dim), initialized N(0, 1).
#pragma once
#include "tensorcast/nn/module.h"

namespace tc::nn {

/// Options of Embedding (torch.nn.Embedding's arguments).
struct EmbeddingOptions {
  /// A table of num_embeddings rows of embedding_dim.
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TC_ARG(int64_t, num_embeddings);  ///< rows of the table
  TC_ARG(int64_t, embedding_dim);   ///< width of each row
};

/// A lookup table: rows of weight by index; TC_MODULE(Embedding) is its holder.
class EmbeddingImpl : public Module {
 public:
  /// From options.
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  /// A table of num_embeddings rows of embedding_dim.
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  /// indices: int64 of any shape -> (*indices.shape, embedding_dim).
  Tensor forward(const Tensor& indices);
  /// weight drawn again from N(0, 1), as PyTorch's.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  EmbeddingOptions options;  ///< as constructed
  Tensor weight;             ///< (num_embeddings, embedding_dim)
};
TC_MODULE(Embedding);

}  // namespace tc::nn
