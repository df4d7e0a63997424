package cliutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// backupTries is how many fresh names Backup tries when the one it picked
// exists: with 64 random bits each, a clash is somebody squatting names,
// and a few retries with new ones beat any squatter who cannot read our
// random numbers.
const backupTries = 8

// ErrBackupExists says the backup file named with --backup exists: it is
// never overwritten.
var ErrBackupExists = errors.New("backup file exists; refusing to overwrite it")

// BackupMarker is in the name of every backup BackupName names: tools
// that list a directory (ringctl serve) skip such files.
const BackupMarker = ".bak-"

// BackupName is the name Backup gives a copy of path when none is asked
// for: path.bak-<UTC time>-<64 random bits in hex>. Nobody can predict it,
// so nobody can plant a file or symlink under it in a shared directory
// such as /dev/shm, and two backups in the same second differ.
func BackupName(path string, now time.Time) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return path + BackupMarker + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:]), nil
}

// Backup copies the file at src to a new file, mode 0600, and returns its
// name: dst when not empty (an existing dst is never overwritten:
// ErrBackupExists), otherwise a fresh BackupName, picked again (up to
// backupTries times) while the name exists. Neither src nor the backup is
// reached through a symlink (O_NOFOLLOW; O_EXCL never follows one either),
// src must be a regular file, and a backup that fails half-way is removed
// if the name still refers to it. The copy is read with plain reads: on a
// file in use it is not a consistent cut, only a record of the bytes
// before a change.
func Backup(src, dst string) (string, error) {
	return backup(src, dst, func() (string, error) { return BackupName(src, time.Now()) })
}

// BackupBefore is Backup for a command about to change the file at path:
// its error is the one line every tool prints, naming the file at fault,
// exit 1 (the operation failed, whatever the cause: the file itself was
// opened fine). Every command that changes a file (ringctl repair
// --apply, hbdump reap --apply) backs it up through here first.
func BackupBefore(path, dst string) (string, error) {
	name, err := Backup(path, dst)
	if err == nil {
		return name, nil
	}
	var pe *os.PathError
	switch {
	case errors.As(err, &pe) && errors.Is(err, ErrBackupExists):
		return "", Exit(ExitProblems, FileError(pe.Path, ErrBackupExists))
	case errors.As(err, &pe) && pe.Path != "":
		return "", Exit(ExitProblems, FileError(pe.Path, errors.New("backup: "+pe.Err.Error())))
	}
	return "", Exit(ExitProblems, FileError(path, errors.New("backup: "+err.Error())))
}

// IsBackupName reports whether name is one BackupName gives
// (PATH.bak-<UTC time>-<random>): a copy, never the file in use.
func IsBackupName(name string) bool {
	i := strings.LastIndex(name, ".bak-")
	if i < 0 {
		return false
	}
	stamp, random, ok := strings.Cut(name[i+len(".bak-"):], "-")
	if !ok || len(random) != 16 {
		return false
	}
	if _, err := time.Parse("20060102T150405Z", stamp); err != nil {
		return false
	}
	_, err := hex.DecodeString(random)
	return err == nil
}

// backup is Backup with the source of fresh names given (tests squat some).
func backup(src, dst string, fresh func() (string, error)) (name string, err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil {
		return "", err
	} else if !st.Mode().IsRegular() {
		return "", &os.PathError{Op: "backup", Path: src, Err: errors.New("not a regular file")}
	}
	out, name, err := createBackup(src, dst, fresh)
	if err != nil {
		return "", err
	}
	made, err := out.Stat()
	if err != nil {
		out.Close()
		return "", err
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = &os.PathError{Op: "backup", Path: name, Err: cerr}
		}
		if err != nil {
			removeIfSame(made, name)
			name = ""
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return name, &os.PathError{Op: "backup", Path: name, Err: err}
	}
	if err := out.Sync(); err != nil {
		return name, &os.PathError{Op: "backup", Path: name, Err: err}
	}
	return name, nil
}

// createBackup creates the backup file: dst, or a fresh name for src.
func createBackup(src, dst string, fresh func() (string, error)) (*os.File, string, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL | unix.O_NOFOLLOW
	if dst != "" {
		f, err := os.OpenFile(dst, flags, 0o600)
		if errors.Is(err, os.ErrExist) {
			return nil, dst, &os.PathError{Op: "backup", Path: dst, Err: ErrBackupExists}
		}
		return f, dst, err
	}
	var err error
	for range backupTries {
		var name string
		if name, err = fresh(); err != nil {
			return nil, "", err
		}
		var f *os.File
		f, err = os.OpenFile(name, flags, 0o600)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, name, err
		}
	}
	return nil, "", fmt.Errorf("backup of %s: %d fresh random names all exist (somebody is creating them): %w", src, backupTries, err)
}

// removeIfSame removes name if it is still the file made (not one another
// user put there meanwhile, in a directory where that is possible).
func removeIfSame(made os.FileInfo, name string) {
	if now, err := os.Lstat(name); err == nil && os.SameFile(made, now) {
		os.Remove(name)
	}
}
