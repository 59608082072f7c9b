//! `shardcron-bench` on mimalloc: the children of the `…, mimalloc` schedulers, which show
//! what the choice of allocator does to a burst of fires (one worker often frees what the
//! other allocated, and glibc's malloc then contends for its arenas' locks).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    shardcron_bench::main(shardcron_bench::Allocator::Mimalloc);
}
