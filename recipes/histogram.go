package recipes

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// Histogram summarises durations so that the summaries of several gateways
// (and of several minutes) merge exactly: the count, sum and max, and a
// count per quarter-octave bucket from 100µs up. A percentile read from it
// is the middle of its bucket (within 9% of the true value), never above
// the max. Only the buckets that were hit are kept.
type Histogram struct {
	Count   int64         `json:"count"`
	Sum     time.Duration `json:"sum"`
	Max     time.Duration `json:"max"`
	Buckets []BucketCount `json:"buckets,omitempty"` // by bucket, ascending
}

// BucketCount is the count of one bucket: bucket 0 holds durations under
// 100µs, bucket i>0 those in [100µs·2^((i-1)/4), 100µs·2^(i/4)).
type BucketCount struct {
	Bucket uint8
	N      int64
}

// MarshalJSON writes [bucket, count].
func (b BucketCount) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]int64{int64(b.Bucket), b.N})
}

// UnmarshalJSON reads [bucket, count] (another gateway's figures).
func (b *BucketCount) UnmarshalJSON(data []byte) error {
	var pair [2]int64
	if err := json.Unmarshal(data, &pair); err != nil {
		return err
	}
	if pair[0] < 0 || pair[0] > math.MaxUint8 || pair[1] < 0 {
		return fmt.Errorf("bucket %d count %d out of range", pair[0], pair[1])
	}
	b.Bucket, b.N = uint8(pair[0]), pair[1]
	return nil
}

// histogramUnit is the lower bound of bucket 1.
const histogramUnit = 100 * time.Microsecond

// bucketOf is the bucket of d.
func bucketOf(d time.Duration) uint8 {
	if d < histogramUnit {
		return 0
	}
	i := 1 + math.Floor(4*math.Log2(float64(d)/float64(histogramUnit)))
	return uint8(min(i, math.MaxUint8))
}

// bucketMid is the geometric middle of bucket b.
func bucketMid(b uint8) time.Duration {
	if b == 0 {
		return histogramUnit / 2
	}
	lower := float64(histogramUnit) * math.Exp2(float64(b-1)/4)
	return time.Duration(lower * math.Exp2(1.0/8))
}

// Add counts one duration.
func (h *Histogram) Add(d time.Duration) {
	d = max(d, 0)
	h.Count++
	h.Sum += d
	h.Max = max(h.Max, d)
	b := bucketOf(d)
	i, found := slices.BinarySearchFunc(h.Buckets, b, func(c BucketCount, b uint8) int { return int(c.Bucket) - int(b) })
	if found {
		h.Buckets[i].N++
		return
	}
	h.Buckets = slices.Insert(h.Buckets, i, BucketCount{Bucket: b, N: 1})
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o Histogram) {
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
	if len(o.Buckets) == 0 {
		return
	}
	merged := make([]BucketCount, 0, len(h.Buckets)+len(o.Buckets))
	i, j := 0, 0
	for i < len(h.Buckets) || j < len(o.Buckets) {
		switch {
		case j == len(o.Buckets) || i < len(h.Buckets) && h.Buckets[i].Bucket < o.Buckets[j].Bucket:
			merged = append(merged, h.Buckets[i])
			i++
		case i == len(h.Buckets) || o.Buckets[j].Bucket < h.Buckets[i].Bucket:
			merged = append(merged, o.Buckets[j])
			j++
		default:
			merged = append(merged, BucketCount{Bucket: h.Buckets[i].Bucket, N: h.Buckets[i].N + o.Buckets[j].N})
			i++
			j++
		}
	}
	h.Buckets = merged
}

// Quantile is the q-th quantile (0 < q <= 1): the middle of its bucket, or
// the max for the last duration; 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.Count))), 1)
	if rank >= h.Count {
		return h.Max
	}
	var seen int64
	for _, b := range h.Buckets {
		seen += b.N
		if seen >= rank {
			return min(bucketMid(b.Bucket), h.Max)
		}
	}
	return h.Max
}

// sane reports whether h is one Add could have made: another gateway's
// figures are checked before they are merged.
func (h *Histogram) sane() bool {
	var n int64
	for i, b := range h.Buckets {
		if b.N <= 0 || i > 0 && b.Bucket <= h.Buckets[i-1].Bucket {
			return false
		}
		n += b.N
	}
	return n == h.Count && h.Count >= 0 && h.Sum >= 0 && h.Max >= 0
}

// minuteHistogram is a Histogram as a minute of figures keeps it: each
// bucket hit packed with its count in 4 bytes (the bucket in the top 8
// bits; a count saturates at 2^24-1, far above what one name sees in a
// minute).
type minuteHistogram struct {
	count    int64
	sum, max time.Duration
	buckets  []uint32 // by bucket, ascending
}

const packedCountMax = 1<<24 - 1

func (h *minuteHistogram) add(d time.Duration) {
	d = max(d, 0)
	h.count++
	h.sum += d
	h.max = max(h.max, d)
	b := uint32(bucketOf(d)) << 24
	i, found := slices.BinarySearchFunc(h.buckets, b, func(p, b uint32) int { return int(p>>24) - int(b>>24) })
	if !found {
		h.buckets = slices.Insert(h.buckets, i, b)
	}
	if h.buckets[i]&packedCountMax < packedCountMax {
		h.buckets[i]++
	}
}

// histogram is h as a Histogram.
func (h *minuteHistogram) histogram() Histogram {
	out := Histogram{Count: h.count, Sum: h.sum, Max: h.max, Buckets: make([]BucketCount, len(h.buckets))}
	var n int64
	for i, p := range h.buckets {
		out.Buckets[i] = BucketCount{Bucket: uint8(p >> 24), N: int64(p & packedCountMax)}
		n += int64(p & packedCountMax)
	}
	out.Count = n // a saturated bucket counts as much as it kept
	return out
}
