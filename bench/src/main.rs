//! `shardcron-bench` on the system's allocator: every section, and the children of every
//! scheduler but the `…, mimalloc` ones. See the library's documentation.

fn main() {
    shardcron_bench::main(shardcron_bench::Allocator::System);
}
