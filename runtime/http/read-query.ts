// A request's query, and the refusal of parameters an endpoint does not take (400
// unknown_query_parameter): a typo such as `?enviroment=sandbox` would otherwise be answered with
// production data, and `POST …/events?environment=sandbox` would create a production event with
// real effects, silently. A read (GET, HEAD) is checked after its handler, against the parameters
// the handler asked for; a write, which must be refused before it does anything, against the
// parameters its route declares (`Route.query`). The WebSocket upgrades (live rooms, devices) are
// reads. A parameter given twice is refused everywhere.

import { shownName } from '../validation/shown-name.ts';
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

  /** Throws 400 naming the first parameter given more than once (which value would count is a guess). */
  assertNoRepeats(): void {
    const seen = new Set<string>();
    for (const name of this.keys()) {
      if (seen.has(name)) throw new InputError(400, 'repeated_query_parameter', `The query parameter "${shownName(name)}" is given more than once.`, { field: shownName(name) });
      seen.add(name);
    }
  }

  /** Throws 400 naming the first parameter given that the handler never asked for. */
  assertAllAsked(): void {
    for (const name of this.keys()) if (!this.#asked.has(name)) throw unknownParameter(name);
  }

  /** Throws 400 naming the first parameter given that is not one of `accepted`. */
  assertOnly(accepted: readonly string[]): void {
    for (const name of this.keys()) if (!accepted.includes(name)) throw unknownParameter(name);
  }
}

function unknownParameter(name: string): InputError {
  const shown = shownName(name);
  // A create takes a record's environment in its body; the query names the environment of an existing one.
  const hint = name === 'environment' ? ' (where a new record has an environment, it goes in the JSON body, as "environment")' : ' (see the API reference for the ones it does)';
  return new InputError(400, 'unknown_query_parameter', `This endpoint takes no query parameter "${shown}"${hint}.`, { field: shown });
}
