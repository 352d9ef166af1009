/**
 * A worker's in-memory queue for one destination, fair in the same way as the claim
 * (fair-claim.ts): transactional jobs (priority 0) before marketing ones, and within a priority
 * the tenants in turn, one job each. A FIFO here would undo the fair claim: a tenant's 1,000
 * claimed marketing messages would sit in front of another tenant's password reset claimed a
 * moment later on the same SMTP session.
 *
 * Map iteration order is insertion order, so the first key is the tenant whose turn it is; after
 * taking one of its jobs it moves to the end (delete + set), O(1) per job.
 */
export interface FairItem {
  tenant: string;
  /** 0 transactional, 1 marketing. */
  priority: number;
}

export class FairQueue<T extends FairItem> {
  private readonly levels: Map<string, T[]>[] = [new Map(), new Map()];
  private count = 0;

  get length(): number {
    return this.count;
  }

  push(item: T): void {
    this.deque(item).push(item);
    this.count++;
  }

  /** Back to the head of its tenant's line (a job taken but not sent). */
  unshift(item: T): void {
    this.deque(item).unshift(item);
    this.count++;
  }

  /** The next job: the highest priority with work, its next tenant in turn. */
  shift(): T | undefined {
    for (const level of this.levels) {
      for (const [tenant, jobs] of level) {
        const item = jobs.shift();
        level.delete(tenant);
        if (jobs.length > 0) level.set(tenant, jobs);
        if (item) {
          this.count--;
          return item;
        }
      }
    }
    return undefined;
  }

  /** The most urgent priority waiting (0 transactional, 1 marketing); null when empty. */
  topPriority(): number | null {
    for (let p = 0; p < this.levels.length; p++) if ((this.levels[p] as Map<string, T[]>).size > 0) return p;
    return null;
  }

  /** Removes and returns every job. */
  drain(): T[] {
    const all: T[] = [];
    for (const level of this.levels) {
      for (const jobs of level.values()) all.push(...jobs);
      level.clear();
    }
    this.count = 0;
    return all;
  }

  private deque(item: T): T[] {
    const level = this.levels[item.priority > 0 ? 1 : 0] as Map<string, T[]>;
    let jobs = level.get(item.tenant);
    if (!jobs) {
      jobs = [];
      level.set(item.tenant, jobs);
    }
    return jobs;
  }
}
