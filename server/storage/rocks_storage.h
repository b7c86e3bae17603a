// RocksStorage: the StorageBackend of the embedded mode, over the process's one RocksDB
// database (store.h). Each ShardWrite becomes one StoreBatch, so a commit is one atomic
// RocksDB write with the store's durability (kProcess: survives kill -9; kMachine: power loss).
//
//   absl::StatusOr<std::unique_ptr<Store>> db = Store::Open({.path = dir});
//   RocksStorage storage(*std::move(db));
//   std::unique_ptr<ShardStore> shard = storage.OpenShard("demo", 0);
//
// Thread safety: thread-safe (the Store is).
#ifndef STREAMLEARN_SERVER_STORAGE_ROCKS_STORAGE_H_
#define STREAMLEARN_SERVER_STORAGE_ROCKS_STORAGE_H_

#include <memory>
#include <string>

#include "server/storage/shard_store.h"
#include "server/storage/store.h"

namespace streamlearn::storage {

class RocksStorage final : public StorageBackend {
 public:
  explicit RocksStorage(std::unique_ptr<Store> store) : store_(std::move(store)) {}

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const override;
  absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                           std::span<const std::string> genesis_lines) override;
  std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) override;
  std::string Describe() const override;

  // The database itself, for what only the embedded mode has (backups, the data directory's
  // floor, checksum scans).
  Store& store() const { return *store_; }

 private:
  std::unique_ptr<Store> store_;
};

// The batch a ShardWrite of (model, shard) becomes (appended to `batch`).
void AddShardWrite(std::string_view model, uint32_t shard, const ShardWrite& write,
                   StoreBatch* batch);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_ROCKS_STORAGE_H_
