// Reads a core module's import and export lists with V8's WebAssembly API. The project's TS lib
// has no DOM (where those types live), so the three members used are declared here.
interface ModuleDescriptor {
  readonly module?: string;
  readonly name: string;
  readonly kind: string;
}

declare const WebAssembly: {
  readonly Module: {
    new (bytes: Uint8Array): object;
    imports(module: object): ModuleDescriptor[];
    exports(module: object): ModuleDescriptor[];
  };
};

export interface WasmInterface {
  /** `module.name (kind)` for every import; the sandbox admits only an empty list. */
  readonly imports: readonly string[];
  /** Export name -> kind (`function`, `memory`, `global`, `table`). */
  readonly exports: ReadonlyMap<string, string>;
}

export function readWasmInterface(bytes: Uint8Array): WasmInterface {
  const module = new WebAssembly.Module(bytes);
  return {
    imports: WebAssembly.Module.imports(module).map((i) => `${i.module ?? ''}.${i.name} (${i.kind})`),
    exports: new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind])),
  };
}
