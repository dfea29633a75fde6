package shard

// Half rounds f to the nearest IEEE 754 half-precision value (ties to even), the rounding of
// the Float16 shards; beyond the half range ±Inf, NaN stays NaN.
func Half(f float32) uint16 { return float32ToHalf(f) }

// HalfValue is the float32 equal to the half-precision value h (exact).
func HalfValue(h uint16) float32 { return halfToFloat32(h) }
