package pass

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// Pass wire format, version 2, little-endian. These constants are part of
// the format.
//
//	submit message:  0 version (u8) = 2 | 1 reply generation (u24)
//	                 4 closure id (u32) | 8 reply slot (u16) | 10 arg len (u16)
//	                 12 marker (u16) = 0xffff | 14 token (u64) | 22 args
//	result message:  0 version (u8) = 2 | 1 status (u8) | 2 data len (u16)
//	                 4 token (u64) | 12 data
//
// The reply slot and generation are the submitter's registration in the
// heartbeat table (heartbeat.Ticket): the slot names its reply ring
// (ReplyPath), the generation tells a worker whether that submitter is
// still the slot's. With the default 64-byte ring slot (56-byte payload) a
// pass carries up to 34 argument bytes and a result up to 44 data bytes.
//
// Version 1 had no version byte (0 closure id | 4 token | 12 arg len | 14
// args), so its first byte can read as 2. The marker tells them apart: in
// a version-1 message bytes 12-13 are its argument length, which equals
// the message's length less 14; 0xffff would make that 65549 bytes, a
// length no version-2 message has (MaxArgs keeps them shorter). A worker
// acks a pass of another version unrun and counts it (Stats.Malformed),
// having nowhere to send an error. Results go only to reply rings, which
// only version-2 workers know, so they need no marker.
const (
	WireVersion  = 2
	submitHeader = 22
	resultHeader = 12

	submitMarker = 0xffff
	// v1Ambiguous is the one length at which a version-1 message carries
	// the marker: no version-2 message may have it.
	v1Ambiguous = 14 + 0xffff
)

// Status is a result's status byte.
type Status uint8

// Result statuses. StatusTruncated is a flag: the error message in the
// data was cut to fit the slot.
const (
	StatusOK             Status = 0
	StatusError          Status = 1 // the closure returned an error; data is its message
	StatusUnknownClosure Status = 2 // no closure registered under the id
	StatusMalformed      Status = 3 // the submit message could not be decoded
	StatusResultTooLarge Status = 4 // the closure's result did not fit; data is a message
	StatusCancelled      Status = 5 // the submitter cancelled the pass: skipped, or its closure's context cancelled
	StatusPoisoned       Status = 6 // the pass reached the submit queue's delivery limit without a result
	StatusTruncated      Status = 0x80
)

var statusNames = [...]string{"ok", "error", "unknown closure", "malformed", "result too large", "cancelled", "poisoned"}

func (s Status) String() string {
	base := s &^ StatusTruncated
	name := fmt.Sprintf("status(%d)", uint8(base))
	if int(base) < len(statusNames) {
		name = statusNames[base]
	}
	if s&StatusTruncated != 0 {
		name += " (message truncated)"
	}
	return name
}

// Errors of passes.
var (
	ErrArgsTooLarge   = errors.New("pass: arguments larger than the submit slot carries")
	ErrResultTooLarge = errors.New("pass: result larger than the result slot carries")
	ErrUnknownClosure = errors.New("pass: no closure registered under that id")
	ErrMalformed      = errors.New("pass: malformed message")
	ErrWireVersion    = errors.New("pass: message of another wire version")
	ErrFailed         = errors.New("pass: failed")
	ErrCancelled      = errors.New("pass: cancelled by its submitter")
	ErrPoisoned       = errors.New("pass: delivered as often as the submit queue allows without a result")
)

// MaxArgs is how many argument bytes fit a submit payload of n bytes.
func MaxArgs(payload int) int { return min(max(payload-submitHeader, 0), v1Ambiguous-1-submitHeader) }

// MaxResult is how many result bytes fit a result payload of n bytes.
func MaxResult(payload int) int { return min(max(payload-resultHeader, 0), 0xffff) }

// submitMsg is a decoded submit message.
type submitMsg struct {
	closure uint32
	token   uint64
	reply   heartbeat.Ticket
	args    []byte // aliases the message
}

// encodeSubmit writes a submit message into buf and returns its length.
func encodeSubmit(buf []byte, m submitMsg) (int, error) {
	if len(m.args) > MaxArgs(len(buf)) {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrArgsTooLarge, len(m.args), MaxArgs(len(buf)))
	}
	if m.reply.Slot > 0xffff {
		return 0, fmt.Errorf("%w: reply slot %d does not fit the wire's 16 bits", ErrMalformed, m.reply.Slot)
	}
	if m.reply.Gen > 0xffffff {
		return 0, fmt.Errorf("%w: reply generation %d does not fit the wire's 24 bits", ErrMalformed, m.reply.Gen)
	}
	binary.LittleEndian.PutUint32(buf[0:], WireVersion|m.reply.Gen<<8)
	binary.LittleEndian.PutUint32(buf[4:], m.closure)
	binary.LittleEndian.PutUint16(buf[8:], uint16(m.reply.Slot))
	binary.LittleEndian.PutUint16(buf[10:], uint16(len(m.args)))
	binary.LittleEndian.PutUint16(buf[12:], submitMarker)
	binary.LittleEndian.PutUint64(buf[14:], m.token)
	copy(buf[submitHeader:], m.args)
	return submitHeader + len(m.args), nil
}

// decodeSubmit parses a submit message; args aliases msg. The message came
// through shared memory: the version and every length are checked against
// what is there. The token and reply address are returned whenever the
// header is whole, so that a malformed pass can still be answered.
func decodeSubmit(msg []byte) (submitMsg, error) {
	if len(msg) < submitHeader {
		return submitMsg{}, fmt.Errorf("%w: %d bytes, a submit header is %d", ErrMalformed, len(msg), submitHeader)
	}
	if msg[0] != WireVersion || binary.LittleEndian.Uint16(msg[12:]) != submitMarker || len(msg) == v1Ambiguous {
		return submitMsg{}, fmt.Errorf("%w: %w: version byte %d, marker %#x, %d bytes; this build speaks version %d",
			ErrMalformed, ErrWireVersion, msg[0], binary.LittleEndian.Uint16(msg[12:]), len(msg), WireVersion)
	}
	m := submitMsg{
		reply:   heartbeat.Ticket{Slot: uint32(binary.LittleEndian.Uint16(msg[8:])), Gen: binary.LittleEndian.Uint32(msg[0:]) >> 8},
		closure: binary.LittleEndian.Uint32(msg[4:]),
		token:   binary.LittleEndian.Uint64(msg[14:]),
	}
	n := int(binary.LittleEndian.Uint16(msg[10:]))
	if n > len(msg)-submitHeader {
		return m, fmt.Errorf("%w: argument length %d, message holds %d", ErrMalformed, n, len(msg)-submitHeader)
	}
	m.args = msg[submitHeader : submitHeader+n]
	return m, nil
}

// encodeResult writes a result message into buf (at least resultHeader
// bytes). Data that does not fit is cut and flagged for error messages;
// for successful results the caller reports StatusResultTooLarge instead.
func encodeResult(buf []byte, token uint64, status Status, data []byte) int {
	if room := MaxResult(len(buf)); len(data) > room {
		data = data[:room]
		status |= StatusTruncated
	}
	buf[0], buf[1] = WireVersion, byte(status)
	binary.LittleEndian.PutUint16(buf[2:], uint16(len(data)))
	binary.LittleEndian.PutUint64(buf[4:], token)
	copy(buf[resultHeader:], data)
	return resultHeader + len(data)
}

// result is one result read from a reply ring.
type result struct {
	token  uint64
	status Status
	data   []byte // the result, or the error message; aliases the message
}

// err returns nil for a successful pass, and otherwise an error wrapping
// ErrFailed (and ErrUnknownClosure / ErrMalformed / ErrResultTooLarge /
// ErrCancelled / ErrPoisoned where the status says so) with the message the worker sent.
func (r result) err() error {
	base := r.status &^ StatusTruncated
	if base == StatusOK {
		return nil
	}
	var cause error
	switch base {
	case StatusUnknownClosure:
		cause = ErrUnknownClosure
	case StatusMalformed:
		cause = ErrMalformed
	case StatusResultTooLarge:
		cause = ErrResultTooLarge
	case StatusCancelled:
		cause = ErrCancelled
	case StatusPoisoned:
		cause = ErrPoisoned
	}
	msg := string(r.data)
	if r.status&StatusTruncated != 0 {
		msg += "…"
	}
	if cause == nil {
		return fmt.Errorf("%w: token %d: %s", ErrFailed, r.token, msg)
	}
	return fmt.Errorf("%w: %w: token %d: %s", ErrFailed, cause, r.token, msg)
}

// decodeResult parses a result message; data aliases msg.
func decodeResult(msg []byte) (result, error) {
	if len(msg) < resultHeader {
		return result{}, fmt.Errorf("%w: result of %d bytes, a header is %d", ErrMalformed, len(msg), resultHeader)
	}
	if msg[0] != WireVersion {
		return result{}, fmt.Errorf("%w: %w: result of version %d, this build speaks %d", ErrMalformed, ErrWireVersion, msg[0], WireVersion)
	}
	r := result{status: Status(msg[1]), token: binary.LittleEndian.Uint64(msg[4:])}
	n := int(binary.LittleEndian.Uint16(msg[2:]))
	if n > len(msg)-resultHeader {
		return r, fmt.Errorf("%w: result length %d, message holds %d", ErrMalformed, n, len(msg)-resultHeader)
	}
	r.data = msg[resultHeader : resultHeader+n]
	return r, nil
}
