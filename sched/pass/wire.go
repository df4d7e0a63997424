package pass

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Pass wire format, little-endian. These constants are part of the format.
//
//	submit message:  0 closure id (u32) | 4 token (u64) | 12 arg len (u16) | 14 args
//	result message:  0 token (u64) | 8 status (u8) | 9 data len (u16) | 11 data
//
// With the default 64-byte ring slot (56-byte payload) a pass carries up to
// 42 argument bytes and a result up to 45 data bytes.
const (
	submitHeader = 14
	resultHeader = 11
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
	StatusTruncated      Status = 0x80
)

func (s Status) String() string {
	name := map[Status]string{StatusOK: "ok", StatusError: "error", StatusUnknownClosure: "unknown closure",
		StatusMalformed: "malformed", StatusResultTooLarge: "result too large"}[s&^StatusTruncated]
	if name == "" {
		name = fmt.Sprintf("status(%d)", uint8(s&^StatusTruncated))
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
	ErrFailed         = errors.New("pass: failed")
)

// MaxArgs is how many argument bytes fit a submit payload of n bytes.
func MaxArgs(payload int) int { return max(payload-submitHeader, 0) }

// MaxResult is how many result bytes fit a result payload of n bytes.
func MaxResult(payload int) int { return max(payload-resultHeader, 0) }

// encodeSubmit writes a submit message into buf and returns its length.
func encodeSubmit(buf []byte, closure uint32, token uint64, args []byte) (int, error) {
	if len(args) > MaxArgs(len(buf)) || len(args) > 0xffff {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrArgsTooLarge, len(args), MaxArgs(len(buf)))
	}
	binary.LittleEndian.PutUint32(buf[0:], closure)
	binary.LittleEndian.PutUint64(buf[4:], token)
	binary.LittleEndian.PutUint16(buf[12:], uint16(len(args)))
	copy(buf[submitHeader:], args)
	return submitHeader + len(args), nil
}

// decodeSubmit parses a submit message; args aliases msg. The message came
// through shared memory: every length is checked against what is there.
func decodeSubmit(msg []byte) (closure uint32, token uint64, args []byte, err error) {
	if len(msg) < submitHeader {
		if len(msg) >= 12 {
			token = binary.LittleEndian.Uint64(msg[4:])
		}
		return 0, token, nil, fmt.Errorf("%w: %d bytes, a submit header is %d", ErrMalformed, len(msg), submitHeader)
	}
	closure = binary.LittleEndian.Uint32(msg[0:])
	token = binary.LittleEndian.Uint64(msg[4:])
	n := int(binary.LittleEndian.Uint16(msg[12:]))
	if n > len(msg)-submitHeader {
		return closure, token, nil, fmt.Errorf("%w: argument length %d, message holds %d", ErrMalformed, n, len(msg)-submitHeader)
	}
	return closure, token, msg[submitHeader : submitHeader+n], nil
}

// encodeResult writes a result message into buf (at least resultHeader
// bytes). Data that does not fit is cut and flagged for error messages;
// for successful results the caller reports StatusResultTooLarge instead.
func encodeResult(buf []byte, token uint64, status Status, data []byte) int {
	room := MaxResult(len(buf))
	if len(data) > room {
		data = data[:room]
		status |= StatusTruncated
	}
	binary.LittleEndian.PutUint64(buf[0:], token)
	buf[8] = byte(status)
	binary.LittleEndian.PutUint16(buf[9:], uint16(len(data)))
	copy(buf[resultHeader:], data)
	return resultHeader + len(data)
}

// Result is one result read from the result ring.
type Result struct {
	Token  uint64
	Status Status
	Data   []byte // the result, or the error message; see Collector.TryRecv for how long it is valid
}

// Err returns nil for a successful pass, and otherwise an error wrapping
// ErrFailed (and ErrUnknownClosure / ErrMalformed / ErrResultTooLarge
// where the status says so) with the message the worker sent.
func (r Result) Err() error {
	base := r.Status &^ StatusTruncated
	if base == StatusOK {
		return nil
	}
	cause := ErrFailed
	switch base {
	case StatusUnknownClosure:
		cause = ErrUnknownClosure
	case StatusMalformed:
		cause = ErrMalformed
	case StatusResultTooLarge:
		cause = ErrResultTooLarge
	}
	msg := string(r.Data)
	if r.Status&StatusTruncated != 0 {
		msg += "…"
	}
	if cause == ErrFailed {
		return fmt.Errorf("%w: token %d: %s", cause, r.Token, msg)
	}
	return fmt.Errorf("%w: %w: token %d: %s", ErrFailed, cause, r.Token, msg)
}

// decodeResult parses a result message; Data aliases msg.
func decodeResult(msg []byte) (Result, error) {
	if len(msg) < resultHeader {
		return Result{}, fmt.Errorf("%w: result of %d bytes, a header is %d", ErrMalformed, len(msg), resultHeader)
	}
	r := Result{Token: binary.LittleEndian.Uint64(msg[0:]), Status: Status(msg[8])}
	n := int(binary.LittleEndian.Uint16(msg[9:]))
	if n > len(msg)-resultHeader {
		return r, fmt.Errorf("%w: result length %d, message holds %d", ErrMalformed, n, len(msg)-resultHeader)
	}
	r.Data = msg[resultHeader : resultHeader+n]
	return r, nil
}
