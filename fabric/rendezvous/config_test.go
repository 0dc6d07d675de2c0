package rendezvous_test

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want rendezvous.Config
	}{
		"nothing": {nil, rendezvous.Config{WorldSize: 1, Master: rendezvous.DefaultMaster, Source: "default"}},
		"torchrun": {map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "127.0.0.1",
			"MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc"},
			rendezvous.Config{Rank: 3, WorldSize: 8, LocalRank: 3, Master: "127.0.0.1:29501", Source: "torchrun", Token: "job:TORCHELASTIC_RUN_ID=abc"}},
		"openmpi": {map[string]string{"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "FERRY_JOB_TOKEN": "s3"},
			rendezvous.Config{Rank: 5, WorldSize: 6, LocalRank: 1, Master: rendezvous.DefaultMaster, Source: "openmpi", Token: "s3"}},
		"slurm": {map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "77"},
			rendezvous.Config{Rank: 2, WorldSize: 4, Master: rendezvous.DefaultMaster, Source: "slurm", Token: "job:SLURM_JOB_ID=77"}},
		"ferry overrides torchrun": {map[string]string{"RANK": "3", "WORLD_SIZE": "8", "FERRY_RANK": "1", "FERRY_MASTER": "127.0.0.1:4000",
			"MASTER_ADDR": "127.0.0.1", "FERRY_JOB_TOKEN": "t", "FERRY_ALLOW_REMOTE": "1", "FERRY_LISTEN_FD": "3"},
			rendezvous.Config{Rank: 1, WorldSize: 8, Master: "127.0.0.1:4000", Source: "ferry", Token: "t", AllowRemote: true, ListenFD: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := rendezvous.ConfigFromEnv(lookup(tc.env))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := rendezvous.ConfigFromEnv(lookup(map[string]string{"RANK": "three"}))
	assert.ErrorIs(t, err, rendezvous.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "RANK")
}

func TestFlagsOverrideEnv(t *testing.T) {
	c, err := rendezvous.ConfigFromEnv(lookup(map[string]string{"RANK": "3", "WORLD_SIZE": "8"}))
	require.NoError(t, err)
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.BindFlags(fs)
	require.NoError(t, fs.Parse([]string{"-rank", "5", "-master", "127.0.0.1:7000"}))
	assert.Equal(t, 5, c.Rank)
	assert.Equal(t, 8, c.WorldSize, "not given: the environment's value stays")
	assert.Equal(t, "127.0.0.1:7000", c.Master)
}
