//! Placeholder. `rbuild <recipe>` replaces this file in each generated copy of the template
//! with the board's placement of the program, its input and its planned-memory arenas.
compile_error!("templates/firmware is built through `rbuild <recipe>` (it generates src/board.rs and link.x)");
