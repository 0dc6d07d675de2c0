package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-3,8,10-11\n")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 3, 8, 10, 11}, got)
	got, err = parseCPUList("")
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"a", "3-1", "1,,2", "-1", "0-999999"} {
		_, err := parseCPUList(bad)
		assert.Error(t, err, bad)
	}
}

func TestCPUInfoWithoutCoreIDs(t *testing.T) {
	// arm64 style: no physical id or core id; every CPU is its own core
	// unless sysfs says otherwise.
	cores, logical, err := parseCPUInfo("cpuinfo", []byte("processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\nBogoMIPS\t: 50\n"))
	require.NoError(t, err)
	assert.Nil(t, cores)
	assert.Equal(t, []int{0, 1}, logical)
}

func TestNormalizeAddr(t *testing.T) {
	assert.Equal(t, "0000:18:00.0", normalizeAddr("00000000:18:00.0"))
	assert.Equal(t, "0000:a8:00.0", normalizeAddr("0000:A8:00.0"))
	assert.Equal(t, "0001:18:00.0", normalizeAddr("0001:18:00.0"))
	assert.Equal(t, "0000:18:00", slotOf("0000:18:00.1"))
}
