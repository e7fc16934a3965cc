// Arrays whose every element is known from its global index, and random layouts to put them in.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "reshard/execute/sharded_array.h"

namespace reshard::testing {

// The bytes of the element at `index` of a `shape` array: a hash of its
// row-major position and `salt`, so a misplaced element is always noticed.
void reference_element(const Shape& shape, uint64_t salt, std::span<const int64_t> index, std::span<std::byte> out);

// reference_element as the ElementFunction ShardedArray::from_function takes.
ElementFunction reference_elements(const Shape& shape, uint64_t salt);

// The whole reference array, row-major.
std::vector<std::byte> reference_host_bytes(const Shape& shape, DType dtype, uint64_t salt);

// This process's reference array in `sharding`.
ShardedArray reference_array(const Shape& shape, DType dtype, const NamedSharding& sharding,
                             const Topology& topology, int process, uint64_t salt);

// Success when every element of every shard equals the reference; else names
// the first wrong element's device and index.
::testing::AssertionResult matches_reference(const ShardedArray& array, uint64_t salt);

// A random mesh of 1 to 3 axes over a random subset of `topology`'s devices in
// random order, and a random spec for `shape` (chunk counts dividing the
// dimensions unless `uneven`).
NamedSharding random_sharding(std::mt19937_64& rng, const Shape& shape, const Topology& topology, bool uneven);

// A random shape of rank 1 to 3 with small dimensions (any size if `uneven`,
// else sizes with many divisors).
Shape random_shape(std::mt19937_64& rng, bool uneven);

// A uniformly chosen element of `items`.
template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& items) {
  return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)];
}

}  // namespace reshard::testing
