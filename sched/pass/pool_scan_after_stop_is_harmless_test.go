package pass

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Regression (found in review): Client guards every use of its mappings (life/gone) so that
// calls after Close return ErrClosed; Pool has no such guard. Stop unmaps
// the heartbeat table, the board and the submit queue (seat.close), and
// ScanNow (documented as usable "whether or not the periodic watchdog is
// enabled", with no word about Stop) then reads the unmapped table: the
// process dies of SIGSEGV. The same holds for a ScanNow running while
// Stop unmaps.
func TestPoolScanAfterStopIsHarmless(t *testing.T) {
	f := newSchedFiles(t)
	c := passHelper.Start(t, "review-scan-after-stop", f.env()...)
	err := c.Wait()
	out, errOut := c.Output()
	if strings.Contains(errOut, "unexpected fault address") || strings.Contains(errOut, "SIGSEGV") {
		i := strings.Index(errOut, "goroutine")
		t.Fatalf("ScanNow after Stop faulted:\n%s", head(errOut[max(i, 0):], 12))
	}
	if err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out, errOut)
	}
}

func init() {
	moreRoles["review-scan-after-stop"] = func(ctx context.Context, f schedFiles) error {
		p, err := NewPool(f.pool(1))
		if err != nil {
			return err
		}
		if err := p.Stop(context.Background()); err != nil {
			return err
		}
		rep := p.ScanNow()
		fmt.Println("scanned", len(rep.Reclaimed))
		return nil
	}
}
