package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where a measurement ran; figures mean little without it.
type Machine struct {
	NProc    int    `json:"nproc"`     // CPUs this process may run on (what nproc prints)
	CPUModel string `json:"cpu_model"` // "model name" from /proc/cpuinfo
	Kernel   string `json:"kernel"`    // uname: sysname, release, machine
	Go       string `json:"go"`        // Go toolchain that built passbench
}

// detectMachine reads the machine's description; parts it cannot read are
// reported as "unknown" rather than failing the benchmark.
func detectMachine() Machine {
	return Machine{
		NProc:    runtime.NumCPU(),
		CPUModel: cpuModel("/proc/cpuinfo"),
		Kernel:   kernel(),
		Go:       runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// cpuModel returns the first "model name" in a cpuinfo file (x86), falling
// back to fields that other architectures use.
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	fallback := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name":
			if val != "" {
				return val
			}
		case "Hardware", "cpu model", "uarch":
			if fallback == "" {
				fallback = val
			}
		}
	}
	if fallback != "" {
		return fallback
	}
	return "unknown"
}

// kernel is what `uname -srm` prints.
func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " +
		unix.ByteSliceToString(u.Release[:]) + " " +
		unix.ByteSliceToString(u.Machine[:])
}
