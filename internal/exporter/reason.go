package exporter

import (
	"errors"
	"io/fs"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// reasons maps the library's sentinel errors to the stable reason label of
// shmkit_file_error, first match wins (a size that does not fit the
// header is "truncated" or "size_mismatch" before "geometry"). docs/cli.md lists them.
var reasons = []struct {
	err    error
	reason string
}{
	{shm.ErrNotExist, "not_found"},
	{shm.ErrSymlink, "symlink"},
	{shm.ErrNotRegular, "not_regular"},
	{shm.ErrForeignOwner, "foreign_owner"},
	{shm.ErrPermissive, "permissive_mode"},
	{shm.ErrLinked, "linked"},
	{fs.ErrPermission, "permission_denied"},
	{shm.ErrNotReady, "not_ready"},
	{shm.ErrTruncated, "truncated"},
	{shm.ErrSizeMismatch, "size_mismatch"},
	{shm.ErrSparse, "sparse"},
	{shm.ErrFault, "fault"},
	{layout.ErrBadMagic, "not_shmkit"},
	{layout.ErrTooShort, "not_shmkit"},
	{layout.ErrVersionMismatch, "version"},
	{layout.ErrChecksum, "checksum"},
	{layout.ErrUnknownKind, "unknown_kind"},
	{layout.ErrWrongKind, "wrong_kind"},
	{layout.ErrGeometry, "geometry"},
	{layout.ErrInvalid, "invalid_header"},
	{transport.ErrCorrupt, "corrupt"},
	{heartbeat.ErrCorruptTable, "corrupt"},
}

// Reason is the reason label of a file that could not be read: one of the
// tokens above, "error" for anything else, "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "error"
}
