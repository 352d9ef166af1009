/** Something a role started; stop() stops taking new work and finishes what is in flight. */
export interface Stoppable {
  name: string;
  stop(): Promise<void>;
  /**
   * Resolves when the engine is warm (threads started, connections open). The node listens for
   * requests only after every engine's warm-up: a node that answers /readyz at full speed from
   * its first request, not after a burst of start-up latency (docs/operations.md "Start-up").
   */
  warm?(): Promise<void>;
}

/**
 * A module's background engine (delivery, webhook dispatch, periodic jobs): each module that has
 * one exports it as `start` from its `engine.ts`, and src/roles.ts lists it once. `D` is what the
 * engine needs of its node (the container holds it all; each engine names only its part).
 */
export type StartEngine<D> = (deps: D) => Stoppable;
