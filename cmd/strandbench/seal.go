package main

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// sealChunkBytes is the plaintext of one TLS record, the unit crypto/tls
// seals a large answer in.
const sealChunkBytes = 16 << 10

// logBytesPerRecord is what one record of topic's partition 0 takes in the
// log under dataDir (RecordBatch v2 bytes, headers included): the bytes a
// consumer's Fetch answer carries for it, and so what TLS must encrypt.
func logBytesPerRecord(dataDir, topic string, records int64) (float64, error) {
	var total int64
	err := filepath.WalkDir(filepath.Join(dataDir, topic+"-0"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("log of %s: %w", topic, err)
	}
	if records <= 0 || total == 0 {
		return 0, fmt.Errorf("log of %s: %d bytes for %d records", topic, total, records)
	}
	return float64(total) / float64(records), nil
}

// sealSecPerMillion is the physical limit of the TLS consume row: the CPU
// seconds that AES-128-GCM (TLS 1.3's first suite, on the CPU's AES
// instructions) takes on one core to seal a million records of
// bytesPerRecord, in 16 KiB records as crypto/tls seals them. Nothing
// else is counted: no read, copy or system call. The fastest of three
// passes over at least 256 MiB.
func sealSecPerMillion(bytesPerRecord float64) (float64, error) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		return 0, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return 0, err
	}
	plain := make([]byte, sealChunkBytes)
	out := make([]byte, 0, sealChunkBytes+aead.Overhead())
	nonce := make([]byte, aead.NonceSize())
	const totalBytes = 256 << 20
	best := time.Duration(0)
	for range 3 {
		start := processCPU()
		for sealed := 0; sealed < totalBytes; sealed += sealChunkBytes {
			nonce[0]++
			out = aead.Seal(out[:0], nonce, plain, nil)
		}
		if took := processCPU() - start; best == 0 || took < best {
			best = took
		}
	}
	if best <= 0 {
		return 0, fmt.Errorf("sealing %d MiB took no measurable CPU", totalBytes>>20)
	}
	return best.Seconds() / totalBytes * bytesPerRecord * 1e6, nil
}
