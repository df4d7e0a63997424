package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Every message passbench sends has the same layout, whatever the transport
// (little-endian, payload bytes in all):
//
//	 0  u32  producer id (endMarker for the end of the stream)
//	 4  u32  message length (the payload size of the run)
//	 8  u64  sequence number: 0, 1, 2... per producer
//	16  i64  send time: shm.MonoNow() just before the send
//	24  ...  filler, a fixed pattern per producer
//	n-4 u32  CRC-32C of bytes [0, n-4)
const (
	offProducer = 0
	offLength   = 4
	offSeq      = 8
	offSent     = 16
	msgHeader   = 24
	msgTrailer  = 4

	minPayload = msgHeader + msgTrailer
	// maxPayload is PIPE_BUF: pipe writes up to this size are atomic, so
	// several producers can share one pipe without interleaving.
	maxPayload = 4096

	endMarker = ^uint32(0)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// msgHeaderFields is what a receiver learns from a valid message.
type msgHeaderFields struct {
	producer uint32
	seq      uint64
	sent     int64
}

func (h msgHeaderFields) isEnd() bool { return h.producer == endMarker }

// newMsg returns a producer's message buffer of payload bytes with the
// fields that never change (producer id, length, filler) filled in; stamp
// fills in the rest before each send.
func newMsg(payload int, producer uint32) []byte {
	b := make([]byte, payload)
	binary.LittleEndian.PutUint32(b[offProducer:], producer)
	binary.LittleEndian.PutUint32(b[offLength:], uint32(payload))
	for i := msgHeader; i < payload-msgTrailer; i++ {
		b[i] = byte(producer*131 + uint32(i)*7)
	}
	return b
}

// stamp sets the sequence number and send time and seals the message.
func stamp(b []byte, seq uint64, sent int64) {
	binary.LittleEndian.PutUint64(b[offSeq:], seq)
	binary.LittleEndian.PutUint64(b[offSent:], uint64(sent))
	n := len(b) - msgTrailer
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
}

// endMsg is the end-of-stream message: a consumer that receives one stops.
func endMsg(payload int) []byte {
	b := newMsg(payload, endMarker)
	stamp(b, 0, 0)
	return b
}

var errChecksum = errors.New("checksum mismatch")

// parseMsg checks a received message of want bytes and returns its header.
// Any failure means the message is corrupt and nothing in it can be trusted.
func parseMsg(b []byte, want int) (msgHeaderFields, error) {
	if len(b) != want {
		return msgHeaderFields{}, fmt.Errorf("message of %d bytes, want %d", len(b), want)
	}
	n := len(b) - msgTrailer
	if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
		return msgHeaderFields{}, errChecksum
	}
	if l := binary.LittleEndian.Uint32(b[offLength:]); l != uint32(want) {
		return msgHeaderFields{}, fmt.Errorf("length field %d, want %d", l, want)
	}
	return msgHeaderFields{
		producer: binary.LittleEndian.Uint32(b[offProducer:]),
		seq:      binary.LittleEndian.Uint64(b[offSeq:]),
		sent:     int64(binary.LittleEndian.Uint64(b[offSent:])),
	}, nil
}

// corruptAt makes one producer damage one of its messages after sealing it
// (a test of the consumers' verification; never set from the command line).
type corruptAt struct {
	Producer int    `json:"producer"`
	Seq      uint64 `json:"seq"`
}
