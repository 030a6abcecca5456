# shellcheck shell=bash
# Sourced by scripts/bench-walk and scripts/bench-bsnmpd.

# A fixture of N UMA-like types with every memTypeTable column present and C per-CPU rows,
# in the format `dump --format json` prints (compact: one type per line).
gen_fixture() {
    local n=$1 c=$2 path=$3
    awk -v n="$n" -v c="$c" 'BEGIN {
        print "{\"generation\":0,\"taken_at_ms\":0,\"source\":\"bench-walk\",\"types\":["
        big = 8589934592
        for (i = 0; i < n; i++) {
            b = big + i
            printf "%s{\"allocator\":\"uma\",\"name\":\"zone-%06d\",\"ordinal\":0,", (i ? "," : ""), i
            printf "\"size\":%d,\"real_size\":%d,\"count_limit\":%d,\"bytes_limit\":%.0f,", 256 + i % 4096, 272 + i % 4096, 1000 + i, b * 3
            printf "\"in_use_count\":%d,\"in_use_bytes\":%.0f,\"free_count\":%d,\"total_count\":%d,", 10 + i, b * 2, 5 + i, 15 + i
            printf "\"allocs\":%.0f,\"frees\":%.0f,\"bytes_allocated\":%.0f,\"bytes_freed\":%.0f,", b + 7, b, b * 5, b * 4
            printf "\"failures\":%d,\"sleeps\":%d,\"xdomain\":%d,\"zone_free\":%d,\"keg_free\":%d,", i, i + 1, i + 2, i + 3, i + 4
            printf "\"size_mask\":%d,\"slab_bytes\":%.0f,\"per_cpu\":[", 4096 + i, b * 6
            for (k = 0; k < c; k++) {
                printf "%s{\"cpu\":%d,\"allocs\":%.0f,\"frees\":%d,\"cache_free\":%d}", (k ? "," : ""), k, b + k, i, 3
            }
            print "]}"
        }
        print "]}"
    }' > "$path"
}
