package rendezvous_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// TestJoinTimeoutSettingAndProgress: with no deadline on the context, the
// configured JoinTimeout bounds Join (not a built-in two minutes), and
// while it waits rank 0 says which ranks it awaits and the others which
// store they wait for.
func TestJoinTimeoutSettingAndProgress(t *testing.T) {
	leakCheck(t)
	defer rendezvous.SetProgressEvery(50 * time.Millisecond)()
	cfgs := world(t, 3)
	var mu sync.Mutex
	msgs := map[int][]string{}
	for r := range cfgs {
		cfgs[r].JoinTimeout = missDeadline
		cfgs[r].Progress = func(m string) { mu.Lock(); msgs[r] = append(msgs[r], m); mu.Unlock() }
	}
	start := time.Now()
	gs, errs := joinAll(context.Background(), cfgs, []int{0, 1})
	defer closeAll(gs)
	took := time.Since(start)
	// Rank 0 reports the missing rank a fifth of the timeout before it
	// ends (500 ms at most), and no earlier; the upper bound leaves a
	// loaded machine slack, and is still far below two minutes.
	assert.Less(t, took, 2*missDeadline+rendezvous.LateReportGrace)
	assert.GreaterOrEqual(t, took, missDeadline*3/4)
	for _, r := range []int{0, 1} {
		require.ErrorIs(t, errs[r], rendezvous.ErrTimeout, "rank %d", r)
		var re *rendezvous.Error
		require.ErrorAs(t, errs[r], &re)
		assert.Equal(t, []int{2}, re.Missing, "rank %d: %v", r, errs[r])
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, msgs[0], "rank 0 never reported progress")
	assert.Contains(t, msgs[0][0], "rank(s) [2] of 3")
	require.NotEmpty(t, msgs[1], "rank 1 never reported progress")
	assert.True(t, strings.Contains(msgs[1][0], "rank 1 waited") && strings.Contains(msgs[1][0], "store"), msgs[1][0])
}

func TestJoinTimeoutFromEnvAndFlags(t *testing.T) {
	env := map[string]string{"FERRY_JOIN_TIMEOUT": "45s"}
	c, err := rendezvous.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, c.JoinTimeout)
	env["FERRY_JOIN_TIMEOUT"] = "soon"
	_, err = rendezvous.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.ErrorIs(t, err, rendezvous.ErrInvalidConfig)
	v, err := rendezvous.Config{WorldSize: 1}.Validate()
	require.NoError(t, err)
	assert.Equal(t, rendezvous.DefaultJoinTimeout, v.JoinTimeout)
	_, err = rendezvous.Config{WorldSize: 1, JoinTimeout: -time.Second}.Validate()
	require.ErrorIs(t, err, rendezvous.ErrInvalidConfig)
}
