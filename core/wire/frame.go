package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FrameBytesMaxDefault is Kafka's default socket.request.max.bytes
// (104857600): the largest request frame a broker accepts, size prefix
// excluded.
const FrameBytesMaxDefault = 100 * 1024 * 1024

// sizePrefixBytes is the length of the int32 size prefix before every frame.
const sizePrefixBytes = 4

// FrameLength decodes a frame's size prefix and checks it against
// frameBytesMax (socket.request.max.bytes) before the caller allocates a
// buffer for the frame: a hostile or corrupt prefix must cost nothing.
func FrameLength(prefix [4]byte, frameBytesMax int32) (int32, error) {
	if frameBytesMax < 0 {
		panic(fmt.Sprintf("wire: frameBytesMax %d is negative", frameBytesMax))
	}
	length := int32(binary.BigEndian.Uint32(prefix[:]))
	if length < 0 {
		return 0, fmt.Errorf("frame size %d is negative (socket.request.max.bytes %d)", length, frameBytesMax)
	}
	if length > frameBytesMax {
		return 0, fmt.Errorf("frame size %d exceeds socket.request.max.bytes %d", length, frameBytesMax)
	}
	return length, nil
}

// reserveSizePrefix appends a placeholder for the size prefix and returns
// dst and the prefix's position, for fillSizePrefix once the frame is built.
func reserveSizePrefix(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// fillSizePrefix writes the length of everything after the prefix at
// position start.
func fillSizePrefix(dst []byte, start int) []byte {
	frameBytes := len(dst) - start - sizePrefixBytes
	if frameBytes < 0 || frameBytes > math.MaxInt32 {
		panic(fmt.Sprintf("wire: encoded frame of %d bytes cannot carry an int32 size", frameBytes))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(frameBytes))
	return dst
}
