//! Structural admission checks on an already-validated module, done before compiling so
//! hostile uploads cost no codegen: no imports, initial memory <= 160 pages, data fits, code
//! small enough (in bytes, and in operand stack height and loop nesting, whose compile cost grows
//! faster than their bytes) that compiling it stays within seconds, few element items and data
//! segments, only plain constants as initializers, and names within the caps of names.rs.

use wasmparser::{
    ConstExpr, DataKind, ElementItems, ElementKind, FuncToValidate, FuncValidatorAllocations,
    FunctionBody, Operator, Parser, Payload, TableInit, TypeRef, ValidPayload, Validator,
    ValidatorResources, WasmFeatures,
};

use crate::engine::{MAX_MEMORY_BYTES, MAX_MEMORY_PAGES, WASM_PAGE_BYTES};
use crate::names::check_name_section;
use crate::refusal::{refuse, Refusal};

/// Compiling ordinary code costs about 100 us per function plus 1.5-7 us per code byte on one core
/// (measured with Cranelift here), so about 10 s at most under these caps; without them an 8 MiB
/// upload could hold a compile thread for a minute and gigabytes of memory. The kits are far below
/// them. These caps do not bound every shape: many locals live across many control frames (5,000
/// locals through 1,000 nested `if`s, 31 KB, compiled for 30 s; 20,000 through 50 nested loops for
/// 65 s), so the hook-runner compiles in a process it kills at a deadline and a memory cap
/// (hook-runner/compile-process.ts); these caps refuse the shapes they know before any codegen.
pub const MAX_FUNCTIONS: u32 = 20_000;
pub const MAX_CODE_BYTES: u32 = 2 * 1024 * 1024;
pub const MAX_FUNCTION_BODY_BYTES: usize = 256 * 1024;
/// Function types cost compile memory too (600,000 of them, 3 bytes each, made a compile hold
/// 3.6 GB); a module has at most one per function it could use, so the function cap bounds them.
pub const MAX_TYPES: u32 = MAX_FUNCTIONS;
/// Declared locals cost compile time without code bytes ("49,990 i64 locals" takes 3 bytes;
/// 20,000 such functions compiled for minutes). About 0.1-0.2 us each here, so well under a second.
pub const MAX_LOCALS: u64 = 1_000_000;

/// Values on a function's operand stack at once. Cranelift's register allocation grows faster
/// than linearly with values live together: 33,000 loads left on the stack (one 254 KB body) held
/// a compile for 60 s. Compilers keep a few dozen there.
pub const MAX_OPERAND_STACK: u32 = 1_000;
/// Loop nesting costs compile time by its square: one body of 20,000 nested empty loops (60 KB)
/// compiled for 10 s, 80,000 for 185 s. This counts, for every `loop`, the loops around it and
/// itself, in all functions together: 1,000,000 is ~1,400 nested loops, well under a second.
/// Compiled code nests a handful.
pub const MAX_LOOP_NESTING_WORK: u64 = 1_000_000;
/// Element segment items, all segments together: a table holds at most 20,000, and each item is
/// set up at every instantiation without fuel (a module of a million `ref.func` items took
/// 170 ms per call at 3 fuel, and a minute to compile).
pub const MAX_ELEMENT_ITEMS: u64 = 20_000;
/// Data segments, active and passive together: Wasmtime lays each out when it compiles the module
/// (its memory image), at a cost that grows at least with their count: one-byte segments compiled
/// in 0.12 s for 1,000, 0.86 s for 8,000 (idle), 3 s for 10,000 under load, 14 s and 690 MB for
/// 40,000. Linkers emit a handful (`.rodata`, `.data`); AssemblyScript one per static string or
/// object, so the cap leaves room for large programs (4,096: ~0.45 s).
pub const MAX_DATA_SEGMENTS: u32 = 4_096;

/// What the scan learned that later stages need.
pub struct Facts {
    /// The module has a start function, which runs at every instantiation.
    pub has_start: bool,
    /// Why its `name` section goes past the caps (names.rs), if it does: whether that refuses the
    /// module depends on where its bytes come from (validate.rs).
    pub long_names: Option<Refusal>,
    /// Why its data segments go past MAX_DATA_SEGMENTS, if they do: that refuses an upload only, as
    /// bytes stored before the cap compiled in seconds and must keep running (validate.rs).
    pub many_data_segments: Option<Refusal>,
}

/// Walks the sections of `bytes`, which `Module::validate` has accepted.
pub fn scan(bytes: &[u8]) -> Result<Facts, Refusal> {
    let mut initial_pages = 0u64;
    let mut has_start = false;
    let mut long_names = None;
    let mut many_data_segments = None;
    let mut locals = 0u64;
    let mut element_items = 0u64;
    let mut loop_work = 0u64;
    // Wasmtime's own validation accepted the module; this one follows each function's operand
    // stack, which the compile-cost caps below need (every feature on: it refuses nothing more).
    let mut validator = Validator::new_with_features(WasmFeatures::all());
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload
            .map_err(|e| refuse("invalid_module", format!("invalid WebAssembly module: {e}")))?;
        let valid = validator
            .payload(&payload)
            .map_err(|e| refuse("invalid_module", format!("invalid WebAssembly module: {e}")))?;
        match payload {
            Payload::ImportSection(reader) => {
                let mut imports = Vec::new();
                for import in reader.into_imports() {
                    let import =
                        import.map_err(|e| refuse("invalid_module", format!("bad import: {e}")))?;
                    imports.push(format!(
                        "{}.{} ({})",
                        import.module,
                        import.name,
                        import_kind(&import.ty)
                    ));
                }
                // Here, not after the walk: an imported memory leaves `initial_pages` at 0, and
                // its data segments would be refused as not fitting, which is not the problem.
                refuse_imports(&imports)?;
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory =
                        memory.map_err(|e| refuse("invalid_module", format!("bad memory: {e}")))?;
                    initial_pages = memory.initial;
                    check_initial_pages(memory.initial)?;
                }
            }
            Payload::DataSection(reader) => {
                many_data_segments = check_code_cap(reader.count(), MAX_DATA_SEGMENTS, |n| {
                    format!("module declares {n} data segments; the sandbox compiles at most {MAX_DATA_SEGMENTS}")
                })
                .err();
                for (index, data) in reader.into_iter().enumerate() {
                    let data = data
                        .map_err(|e| refuse("invalid_module", format!("bad data segment: {e}")))?;
                    if let DataKind::Active { offset_expr, .. } = &data.kind {
                        check_initializer(offset_expr, || {
                            format!("the offset of data segment #{index}")
                        })?;
                    }
                    check_data_segment(index, &data, initial_pages)?;
                }
            }
            Payload::GlobalSection(reader) => {
                for (index, global) in reader.into_iter().enumerate() {
                    let global =
                        global.map_err(|e| refuse("invalid_module", format!("bad global: {e}")))?;
                    check_initializer(&global.init_expr, || {
                        format!("the initializer of global #{index}")
                    })?;
                }
            }
            Payload::TableSection(reader) => {
                for (index, table) in reader.into_iter().enumerate() {
                    let table =
                        table.map_err(|e| refuse("invalid_module", format!("bad table: {e}")))?;
                    if let TableInit::Expr(expr) = &table.init {
                        check_initializer(expr, || format!("the initializer of table #{index}"))?;
                    }
                }
            }
            Payload::ElementSection(reader) => {
                for (index, element) in reader.into_iter().enumerate() {
                    let element = element.map_err(|e| {
                        refuse("invalid_module", format!("bad element segment: {e}"))
                    })?;
                    if let ElementKind::Active { offset_expr, .. } = &element.kind {
                        check_initializer(offset_expr, || {
                            format!("the offset of element segment #{index}")
                        })?;
                    }
                    element_items = element_items.saturating_add(u64::from(match &element.items {
                        ElementItems::Functions(items) => items.count(),
                        ElementItems::Expressions(_, items) => items.count(),
                    }));
                    check_code_cap(element_items, MAX_ELEMENT_ITEMS, |_| {
                        format!("element segments hold more than {MAX_ELEMENT_ITEMS} items in all; the sandbox sets up at most {MAX_ELEMENT_ITEMS}")
                    })?;
                    if let ElementItems::Expressions(_, items) = element.items {
                        for item in items {
                            let item = item.map_err(|e| {
                                refuse("invalid_module", format!("bad element segment: {e}"))
                            })?;
                            check_initializer(&item, || {
                                format!("an item of element segment #{index}")
                            })?;
                        }
                    }
                }
            }
            Payload::TypeSection(reader) => check_code_cap(reader.count(), MAX_TYPES, |n| {
                format!("module declares {n} types; the sandbox compiles at most {MAX_TYPES}")
            })?,
            Payload::FunctionSection(reader) => {
                check_code_cap(reader.count(), MAX_FUNCTIONS, |n| {
                    format!("module defines {n} functions; the sandbox compiles at most {MAX_FUNCTIONS}")
                })?
            }
            Payload::CodeSectionStart { size, .. } => {
                check_code_cap(size, MAX_CODE_BYTES, |n| {
                    format!("the code section is {n} bytes; the sandbox compiles at most {MAX_CODE_BYTES}")
                })?
            }
            Payload::CodeSectionEntry(body) => {
                check_code_cap(body.range().len(), MAX_FUNCTION_BODY_BYTES, |n| {
                    format!("a function body is {n} bytes; the sandbox compiles at most {MAX_FUNCTION_BODY_BYTES} per function")
                })?
            }
            Payload::StartSection { .. } => has_start = true,
            Payload::CustomSection(reader) if reader.name() == "name" && long_names.is_none() => {
                long_names = check_name_section(&reader).err();
            }
            _ => {}
        }
        // After the body's byte cap: its locals and operators are read once, here.
        if let ValidPayload::Func(func, body) = valid {
            check_function_shape(func, &body, &mut locals, &mut loop_work)?;
        }
    }
    Ok(Facts {
        has_start,
        long_names,
        many_data_segments,
    })
}

/// Adds a function body's declared locals to `locals` (refused past MAX_LOCALS), refuses it when
/// its operand stack grows past MAX_OPERAND_STACK, and adds its loop nesting to `loop_work`
/// (refused past MAX_LOOP_NESTING_WORK): all cost compile time that the byte caps do not bound.
fn check_function_shape(
    func: FuncToValidate<ValidatorResources>,
    body: &FunctionBody<'_>,
    locals_total: &mut u64,
    loop_work: &mut u64,
) -> Result<(), Refusal> {
    let invalid = |e: wasmparser::BinaryReaderError| {
        refuse("invalid_module", format!("invalid function body: {e}"))
    };
    let mut validator = func.into_validator(FuncValidatorAllocations::default());
    let mut locals = body.get_locals_reader().map_err(invalid)?;
    for _ in 0..locals.get_count() {
        let offset = locals.original_position();
        let (count, ty) = locals.read().map_err(invalid)?;
        *locals_total = locals_total.saturating_add(u64::from(count));
        check_code_cap(*locals_total, MAX_LOCALS, |_| {
            format!("functions declare more than {MAX_LOCALS} locals in all; the sandbox compiles at most {MAX_LOCALS}")
        })?;
        validator
            .define_locals(offset, count, ty)
            .map_err(invalid)?;
    }
    let mut operators = body.get_operators_reader().map_err(invalid)?;
    // For each control frame opened in the body: whether it is a loop.
    let mut frames: Vec<bool> = Vec::new();
    let mut loops_open = 0u64;
    while !operators.eof() {
        let (operator, offset) = operators.read_with_offset().map_err(invalid)?;
        validator.op(offset, &operator).map_err(invalid)?;
        match operator {
            Operator::Loop { .. } => {
                frames.push(true);
                loops_open += 1;
                *loop_work = loop_work.saturating_add(loops_open);
            }
            Operator::Block { .. }
            | Operator::If { .. }
            | Operator::Try { .. }
            | Operator::TryTable { .. } => frames.push(false),
            Operator::End | Operator::Delegate { .. } => {
                if frames.pop() == Some(true) {
                    loops_open -= 1;
                }
            }
            _ => {}
        }
        check_code_cap(validator.operand_stack_height(), MAX_OPERAND_STACK, |_| {
            format!("a function holds more than {MAX_OPERAND_STACK} values on its operand stack at once; the sandbox compiles at most {MAX_OPERAND_STACK}")
        })?;
    }
    check_code_cap(*loop_work, MAX_LOOP_NESTING_WORK, |_| {
        format!("loops nest too deeply (counting, for every loop, the loops around it: more than {MAX_LOOP_NESTING_WORK} in all); the sandbox compiles at most that")
    })
}

fn import_kind(ty: &TypeRef) -> &'static str {
    match ty {
        TypeRef::Func(_) | TypeRef::FuncExact(_) => "function",
        TypeRef::Table(_) => "table",
        TypeRef::Memory(_) => "memory",
        TypeRef::Global(_) => "global",
        TypeRef::Tag(_) => "tag",
    }
}

fn refuse_imports(imports: &[String]) -> Result<(), Refusal> {
    if imports.is_empty() {
        return Ok(());
    }
    let shown = imports
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = if imports.len() > 5 {
        format!(" and {} more", imports.len() - 5)
    } else {
        String::new()
    };
    Err(refuse(
        "imports_not_allowed",
        format!(
            "modules may not import anything (no WASI, no host functions); found {} import(s): {shown}{more}",
            imports.len()
        ),
    ))
}

/// Refuses an initializer (a global's value, a segment's offset, a table element) that is not a
/// single constant or function reference. Computed ones (`global.get`, extended-const arithmetic)
/// are valid wasm that no toolchain emits without imports, and they made compiles of tiny modules
/// take minutes: 86,000 data segments, one of them at a `global.get` offset, 44 s and 1.6 GB.
fn check_initializer(expr: &ConstExpr<'_>, what: impl FnOnce() -> String) -> Result<(), Refusal> {
    let mut operators = expr.get_operators_reader();
    let constant = matches!(
        operators.read(),
        Ok(Operator::I32Const { .. }
            | Operator::I64Const { .. }
            | Operator::F32Const { .. }
            | Operator::F64Const { .. }
            | Operator::V128Const { .. }
            | Operator::RefNull { .. }
            | Operator::RefFunc { .. })
    );
    if constant && matches!(operators.read(), Ok(Operator::End)) {
        return Ok(());
    }
    Err(refuse(
        "code_too_large",
        format!(
            "{} is computed; the sandbox takes only a constant (or ref.func/ref.null) there",
            what()
        ),
    ))
}

/// Refuses code past one of the compile-cost caps, with `message(value)` as the reason.
fn check_code_cap<T: PartialOrd + Copy>(
    value: T,
    cap: T,
    message: impl FnOnce(T) -> String,
) -> Result<(), Refusal> {
    if value <= cap {
        return Ok(());
    }
    Err(refuse("code_too_large", message(value)))
}

fn check_initial_pages(pages: u64) -> Result<(), Refusal> {
    if pages <= MAX_MEMORY_PAGES {
        return Ok(());
    }
    Err(refuse(
        "memory_too_large",
        format!(
            "memory declares {pages} initial pages ({} bytes); the sandbox allows at most {MAX_MEMORY_PAGES} pages ({MAX_MEMORY_BYTES} bytes)",
            pages.saturating_mul(WASM_PAGE_BYTES)
        ),
    ))
}

/// Refuses any segment larger than the memory cap, and active segments whose (constant:
/// check_initializer) offset overruns the initial memory.
fn check_data_segment(
    index: usize,
    data: &wasmparser::Data<'_>,
    initial_pages: u64,
) -> Result<(), Refusal> {
    let len = data.data.len() as u64;
    if len > MAX_MEMORY_BYTES as u64 {
        return Err(refuse(
            "data_segment_too_large",
            format!("data segment #{index} is {len} bytes, more than the {MAX_MEMORY_BYTES}-byte sandbox memory"),
        ));
    }
    let DataKind::Active { offset_expr, .. } = &data.kind else {
        return Ok(());
    };
    // Constant only when the whole expression is `i32.const; end` (extended-const may compute it).
    let mut operators = offset_expr.get_operators_reader();
    let (Ok(Operator::I32Const { value }), Ok(Operator::End)) =
        (operators.read(), operators.read())
    else {
        return Ok(());
    };
    let offset = u64::from(value as u32);
    let initial_bytes = initial_pages * WASM_PAGE_BYTES;
    if offset + len <= initial_bytes {
        return Ok(());
    }
    Err(refuse(
        "data_segment_too_large",
        format!(
            "data segment #{index} ({len} bytes at offset {offset}) does not fit in the initial memory of {initial_pages} pages ({initial_bytes} bytes)"
        ),
    ))
}
