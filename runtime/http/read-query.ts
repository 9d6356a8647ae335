// A request's query that remembers which parameters its handler asked for. A read (GET, HEAD) that
// carries a parameter its handler never asked for is refused, 400 unknown_query_parameter: a typo
// such as `?enviroment=sandbox` would otherwise be answered with production data, silently.
// Writes are not checked this way (the check comes after the handler); they take parameters only
// to find a record, and a typo there finds nothing.

import { InputError } from '../errors.ts';

export class ReadQuery extends URLSearchParams {
  readonly #asked = new Set<string>();

  override get(name: string): string | null {
    this.#asked.add(name);
    return super.get(name);
  }

  override getAll(name: string): string[] {
    this.#asked.add(name);
    return super.getAll(name);
  }

  override has(name: string, value?: string): boolean {
    this.#asked.add(name);
    return value === undefined ? super.has(name) : super.has(name, value);
  }

  /** Throws 400 naming the first parameter given that the handler never asked for. */
  assertAllAsked(): void {
    for (const name of this.keys()) {
      if (this.#asked.has(name)) continue;
      const shown = name.slice(0, 64);
      throw new InputError(400, 'unknown_query_parameter', `This endpoint takes no query parameter "${shown}" (see the API reference for the ones it does).`, { field: shown });
    }
  }
}
