//! The seeds' own figures, printed beside this run's (docs/BENCHMARKS.md,
//! "How every benchmark measures and reports"), each labelled with its source and the hardware it
//! was measured on. Copied from the papers in `seeds/`, not measured:
//!
//! - seed 000, *Space-Time Memory* (STM): Fig. 10, STM one-way latency, a put in one address
//!   space and a get + consume in another, the channel with the consumer (the caption says
//!   "minimum", the text "average"); Fig. 8, CLF (the packet layer under STM) one-way latency;
//!   Fig. 11, STM bandwidth of 230 400-byte frames at the consumer's address space, configuration
//!   A (1 producer → 1 consumer) and B (2 producers in two address spaces → 2 consumers in a
//!   third); Fig. 9's rightmost column, CLF bandwidth with an acknowledgement per 230 400 bytes.
//! - seed 002, *D-Stampede*: exchange latency (put + get, or half a send/receive cycle) at 35 000
//!   and 55 000 bytes, inside the cluster (CLF) and from C and Java client libraries over TCP/IP.
//!   Configuration 3 (producer and consumer both clients of the server, every item crossing the
//!   network twice) is the shape of this benchmark's Stampede ping-pong.
//! - seed 003, *Performance study of a cluster runtime*: Stampede put throughput at 4 KB across
//!   nodes beside a CLF ping-pong.
//!
//! MB = 10^6 bytes, as in the papers (a 30 fps camera of 230 400-byte frames: 6.912 MB/s).

use crate::payload::{case_name, IMAGE_BYTES};
use crate::report::Line;

/// AlphaServer cluster of seed 000 (STM).
const STM_MEMORY_CHANNEL: &str = "cluster of AlphaServer 4100 SMPs (four 400 MHz EV5 Alpha processors each), \
     Digital Unix 4.0, Memory Channel between SMPs (seed 000, 1998)";
const STM_UDP_LAN: &str = "cluster of AlphaServer 4100 SMPs (four 400 MHz EV5 Alpha processors each), \
     Digital Unix 4.0, UDP over a 100 Mbit/s FDDI LAN between SMPs (seed 000, 1998)";
/// The Pentium III cluster of seed 002 (D-Stampede).
const D_STAMPEDE: &str = "17 eight-way SMPs, 550 MHz Pentium III Xeon, 4 GB RAM, RedHat Linux 7.1, \
     Gigabit Ethernet; one cluster node acts as the end device (seed 002)";
/// The Pentium II cluster of seed 003.
const SEED_003: &str = "four-node cluster, dual Pentium II 300 MHz, 512 MB RAM, RedHat Linux 7.1, \
     100 Mbps Fast Ethernet (seed 003)";

/// One latency figure of a seed.
struct Latency {
    subject: &'static str,
    source: &'static str,
    hardware: &'static str,
    payload_bytes: usize,
    one_way_us: f64,
}

/// One bandwidth figure of a seed.
struct Bandwidth {
    case: &'static str,
    subject: &'static str,
    source: &'static str,
    hardware: &'static str,
    frame_bytes: usize,
    mb_per_s: f64,
}

const STM: &str = "seed: STM (put → get + consume, channel with the consumer)";
const STM_FIG_10: &str = "seed 000 Fig. 10";
const CLF: &str = "seed: CLF raw send/receive (the packet layer under STM)";
const CLF_FIG_8: &str = "seed 000 Fig. 8";

/// Seed 000 Fig. 10 (STM) and Fig. 8 (CLF), both media; seed 002's exchange latencies.
const LATENCIES: &[Latency] = &[
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_MEMORY_CHANNEL, payload_bytes: 8, one_way_us: 242.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_MEMORY_CHANNEL, payload_bytes: 128, one_way_us: 254.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_MEMORY_CHANNEL, payload_bytes: 1024, one_way_us: 352.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_MEMORY_CHANNEL, payload_bytes: 4096, one_way_us: 607.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_MEMORY_CHANNEL, payload_bytes: 8112, one_way_us: 900.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_UDP_LAN, payload_bytes: 8, one_way_us: 449.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_UDP_LAN, payload_bytes: 128, one_way_us: 487.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_UDP_LAN, payload_bytes: 1024, one_way_us: 691.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_UDP_LAN, payload_bytes: 4096, one_way_us: 1357.0 },
    Latency { subject: STM, source: STM_FIG_10, hardware: STM_UDP_LAN, payload_bytes: 8112, one_way_us: 2078.0 },
    Latency { subject: CLF, source: CLF_FIG_8, hardware: STM_MEMORY_CHANNEL, payload_bytes: 8, one_way_us: 19.0 },
    Latency { subject: CLF, source: CLF_FIG_8, hardware: STM_MEMORY_CHANNEL, payload_bytes: 128, one_way_us: 23.0 },
    Latency { subject: CLF, source: CLF_FIG_8, hardware: STM_MEMORY_CHANNEL, payload_bytes: 1024, one_way_us: 42.0 },
    Latency { subject: CLF, source: CLF_FIG_8, hardware: STM_MEMORY_CHANNEL, payload_bytes: 4096, one_way_us: 147.0 },
    Latency { subject: CLF, source: CLF_FIG_8, hardware: STM_MEMORY_CHANNEL, payload_bytes: 8152, one_way_us: 293.0 },
    Latency {
        subject: "seed: D-Stampede inside the cluster (CLF over UDP)",
        source: "seed 002 Result 1 (Fig. 11)",
        hardware: D_STAMPEDE,
        payload_bytes: 35_000,
        one_way_us: 2580.0,
    },
    Latency {
        subject: "seed: D-Stampede, C client → cluster (TCP/IP)",
        source: "seed 002 Result 1 (Fig. 12)",
        hardware: D_STAMPEDE,
        payload_bytes: 35_000,
        one_way_us: 3200.0,
    },
    Latency {
        subject: "seed: D-Stampede, Java client → cluster (TCP/IP)",
        source: "seed 002 Result 1 (Fig. 13)",
        hardware: D_STAMPEDE,
        payload_bytes: 35_000,
        one_way_us: 10_700.0,
    },
    Latency {
        subject: "seed: TCP/IP producer-consumer pair in C (D-Stampede's reference)",
        source: "seed 002 Exp. 2 (Fig. 12)",
        hardware: D_STAMPEDE,
        payload_bytes: 55_000,
        one_way_us: 2500.0,
    },
    Latency {
        subject: "seed: D-Stampede, C client puts, consumer with the channel on the cluster (config 1)",
        source: "seed 002 Exp. 2 (Fig. 12)",
        hardware: D_STAMPEDE,
        payload_bytes: 55_000,
        one_way_us: 3300.0,
    },
    Latency {
        subject: "seed: D-Stampede, C client puts, consumer on the cluster away from the channel (config 2)",
        source: "seed 002 Exp. 2 (Fig. 12)",
        hardware: D_STAMPEDE,
        payload_bytes: 55_000,
        one_way_us: 5000.0,
    },
    Latency {
        subject: "seed: D-Stampede, C client puts, C client gets (config 3: this benchmark's shape)",
        source: "seed 002 Exp. 2 (Fig. 12)",
        hardware: D_STAMPEDE,
        payload_bytes: 55_000,
        one_way_us: 6100.0,
    },
];

/// The case names of the throughput rows (configurations A and B of STM Fig. 11).
pub const CASE_A: &str = "230400B 1->1 (A)";
pub const CASE_B: &str = "230400B 2->2 (B)";

/// Seed 000 Fig. 11 and Fig. 9; seed 003 Fig. 6.
const BANDWIDTHS: &[Bandwidth] = &[
    Bandwidth {
        case: CASE_A,
        subject: "seed: STM",
        source: "seed 000 Fig. 11",
        hardware: STM_MEMORY_CHANNEL,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 21.7,
    },
    Bandwidth {
        case: CASE_A,
        subject: "seed: STM",
        source: "seed 000 Fig. 11",
        hardware: STM_UDP_LAN,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 8.9,
    },
    Bandwidth {
        case: CASE_B,
        subject: "seed: STM",
        source: "seed 000 Fig. 11",
        hardware: STM_MEMORY_CHANNEL,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 31.0,
    },
    Bandwidth {
        case: CASE_B,
        subject: "seed: STM",
        source: "seed 000 Fig. 11",
        hardware: STM_UDP_LAN,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 11.2,
    },
    Bandwidth {
        case: CASE_A,
        subject: "seed: CLF raw, 8152-byte packets, an acknowledgement per 230 400 bytes",
        source: "seed 000 Fig. 9 (8152*)",
        hardware: STM_MEMORY_CHANNEL,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 32.6,
    },
    Bandwidth {
        case: CASE_A,
        subject: "seed: CLF raw, 8152-byte packets, an acknowledgement per 230 400 bytes",
        source: "seed 000 Fig. 9 (8152*)",
        hardware: STM_UDP_LAN,
        frame_bytes: IMAGE_BYTES,
        mb_per_s: 10.5,
    },
    Bandwidth {
        case: "4096B put stream",
        subject: "seed: Stampede put across nodes",
        source: "seed 003 Fig. 6",
        hardware: SEED_003,
        frame_bytes: 4096,
        mb_per_s: 4.5,
    },
    Bandwidth {
        case: "4096B put stream",
        subject: "seed: CLF ping-pong",
        source: "seed 003 Fig. 6",
        hardware: SEED_003,
        frame_bytes: 4096,
        mb_per_s: 5.2,
    },
];

/// Prints the seeds' latency figures as `bench` lines, one per figure.
pub fn emit_latencies(bench: &str) {
    for figure in LATENCIES {
        Line::new(bench, &case_name(figure.payload_bytes), figure.subject)
            .field("one_way_us", figure.one_way_us)
            .field("source", figure.source)
            .field("hardware", figure.hardware)
            .field("measured", false)
            .emit();
    }
}

/// Prints the seeds' bandwidth figures as `bench` lines, one per figure.
pub fn emit_bandwidths(bench: &str) {
    for figure in BANDWIDTHS {
        Line::new(bench, figure.case, figure.subject)
            .field("mb_per_s", figure.mb_per_s)
            .field("frames_per_s", figure.mb_per_s * 1e6 / figure.frame_bytes as f64)
            .field("frame_bytes", figure.frame_bytes as u64)
            .field("source", figure.source)
            .field("hardware", figure.hardware)
            .field("measured", false)
            .emit();
    }
}

/// The STM Memory Channel one-way figure for `payload_bytes`, if Fig. 10 has that size.
pub fn stm_memory_channel_us(payload_bytes: usize) -> Option<f64> {
    LATENCIES
        .iter()
        .find(|f| f.subject == STM && f.hardware == STM_MEMORY_CHANNEL && f.payload_bytes == payload_bytes)
        .map(|f| f.one_way_us)
}

/// The STM Memory Channel bandwidth in MB/s for a throughput case ([`CASE_A`], [`CASE_B`]).
pub fn stm_memory_channel_mb_per_s(case: &str) -> Option<f64> {
    BANDWIDTHS
        .iter()
        .find(|f| f.case == case && f.subject == "seed: STM" && f.hardware == STM_MEMORY_CHANNEL)
        .map(|f| f.mb_per_s)
}
