import { type DependencyList, useCallback, useEffect, useRef, useState } from 'react';

export interface AsyncState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
  setData: (fn: (old: T | undefined) => T | undefined) => void;
}

/** Runs `fn` when `deps` change; stale answers (from an older run) are dropped. */
export function useAsync<T>(fn: () => Promise<T>, deps: DependencyList): AsyncState<T> {
  const [data, setDataState] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const run = useRef(0);
  // biome-ignore lint/correctness/useExhaustiveDependencies: deps are the caller's
  useEffect(() => {
    const mine = ++run.current;
    setLoading(true);
    setError(undefined);
    fn().then(
      (d) => {
        if (run.current !== mine) return;
        setDataState(d);
        setLoading(false);
      },
      (e: unknown) => {
        if (run.current !== mine) return;
        setError(e instanceof Error ? e : new Error(String(e)));
        setLoading(false);
      },
    );
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const setData = useCallback((f: (old: T | undefined) => T | undefined) => setDataState(f), []);
  return { data, error, loading, reload, setData };
}

/** Runs an action, tracking busy and error state for a button or form. */
export function useAction<A extends unknown[], R>(fn: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const run = useCallback(
    async (...args: A): Promise<R | undefined> => {
      setBusy(true);
      setError(undefined);
      try {
        return await fn(...args);
      } catch (e) {
        setError(e instanceof Error ? e : new Error(String(e)));
        return undefined;
      } finally {
        setBusy(false);
      }
    },
    [fn],
  );
  return { run, busy, error, clearError: () => setError(undefined) };
}

export interface Paged<T> {
  items: T[];
  /** Cursor of the next page; null when everything is loaded. */
  cursor: string | null;
  /** True while the first page loads (not while more pages load). */
  loading: boolean;
  loadingMore: boolean;
  error: Error | undefined;
  reload: () => void;
  loadMore: () => void;
  /** Local edits after an action, without a reload. */
  update: (fn: (items: T[]) => T[]) => void;
}

/** A cursor-paged list that grows with "Load more"; a change of `deps` starts over. */
export function usePaged<T>(
  load: (cursor?: string) => Promise<{ data: T[]; next_cursor: string | null }>,
  deps: DependencyList,
): Paged<T> {
  const [items, setItems] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [moreError, setMoreError] = useState<Error | undefined>(undefined);
  const first = useAsync(async () => {
    const p = await load();
    setItems(p.data);
    setCursor(p.next_cursor);
    setMoreError(undefined);
    return true;
  }, deps);
  const loadMore = useCallback(() => {
    if (!cursor) return;
    setLoadingMore(true);
    setMoreError(undefined);
    load(cursor).then(
      (p) => {
        setItems((old) => [...old, ...p.data]);
        setCursor(p.next_cursor);
        setLoadingMore(false);
      },
      (e: unknown) => {
        setMoreError(e instanceof Error ? e : new Error(String(e)));
        setLoadingMore(false);
      },
    );
  }, [cursor, load]);
  return {
    items,
    cursor,
    loading: first.loading,
    loadingMore,
    error: first.error ?? moreError,
    reload: first.reload,
    loadMore,
    update: (fn) => setItems(fn),
  };
}
