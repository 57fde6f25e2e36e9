/**
 * One picture of a session's tree, drawn the same by the terminal's `/tree` and the viewer: the
 * current branch is one flat list, from its first checkpoint to where the session is; every other
 * branch shows where it parts from the branch it leaves — after the last checkpoint the two share
 * — as a flat list of its own (with its own side branches where they part from it). So the
 * indent is the number of forks on the way, never the length of a branch, and exactly one row is
 * where the session is. Pure, and over the tree's JSON shape too (the viewer draws it from that).
 */

/** A checkpoint as the tree has it (`SessionTree`, or its JSON). */
export interface PictureCheckpoint {
  readonly seq: number
  readonly prompt: string
  readonly ts: number
  readonly parent: number | null
  readonly children: ReadonlyArray<number>
  readonly current: boolean
  readonly label?: string | undefined
}

/** A branch as the tree has it: by its tip. */
export interface PictureBranchTip {
  readonly leaf: number
  readonly checkpoint: number | null
  readonly current: boolean
  readonly label?: string | undefined
  readonly pruned?: true | undefined
}

export interface PictureInput {
  readonly leaf: number
  readonly checkpoints: ReadonlyArray<PictureCheckpoint>
  readonly branches: ReadonlyArray<PictureBranchTip>
}

/** A checkpoint of a branch, with the branches that part from it there. */
export interface PictureStep {
  readonly checkpoint: PictureCheckpoint
  /** Branches that share everything up to this checkpoint and go on differently, oldest first. */
  readonly sideBranches: ReadonlyArray<PictureBranch>
}

export interface PictureBranch {
  /** Its tip: where a switch to it goes. */
  readonly tip: number
  /** The current branch (its tip is where the session is). */
  readonly current: boolean
  readonly label?: string | undefined
  /** The checkpoint it parts from (the last one it shares with the branch it leaves); null: from the start. */
  readonly partsFrom: number | null
  /** Its own checkpoints after the parting point, oldest first (none: it goes on without a prompt). */
  readonly steps: ReadonlyArray<PictureStep>
}

export interface TreePicture {
  /** The current branch, whole. */
  readonly main: PictureBranch
  /** Branches that part before the first checkpoint of the current branch. */
  readonly atStart: ReadonlyArray<PictureBranch>
  /** Tips of pruned branches: no move goes there; shown as a count. */
  readonly pruned: ReadonlyArray<number>
}

interface MutableStep {
  readonly checkpoint: PictureCheckpoint
  readonly sideBranches: Array<PictureBranch>
}

/** The picture of `tree` (see the module's comment). */
export const treePicture = (tree: PictureInput): TreePicture => {
  const bySeq = new Map(tree.checkpoints.map((checkpoint) => [checkpoint.seq, checkpoint]))
  /** The checkpoints from the first to `last`, oldest first. */
  const chainTo = (last: number | null): Array<PictureCheckpoint> => {
    const chain: Array<PictureCheckpoint> = []
    for (let at = last === null ? undefined : bySeq.get(last); at !== undefined; at = at.parent === null ? undefined : bySeq.get(at.parent)) {
      chain.push(at)
    }
    return chain.reverse()
  }
  const live = tree.branches.filter((branch) => branch.pruned !== true)
  const currentTip: PictureBranchTip = live.find((branch) => branch.current) ?? {
    leaf: tree.leaf,
    checkpoint: [...tree.checkpoints].reverse().find((checkpoint) => checkpoint.current)?.seq ?? null,
    current: true
  }
  const placed = new Map<number, MutableStep>()
  const atStart: Array<PictureBranch> = []
  const place = (tip: PictureBranchTip): PictureBranch => {
    const chain = chainTo(tip.checkpoint)
    // Branches are root paths of one tree: what is placed already is a prefix of this chain.
    let shared = 0
    while (shared < chain.length && placed.has(chain[shared]!.seq)) shared++
    const steps = chain.slice(shared).map((checkpoint): MutableStep => ({ checkpoint, sideBranches: [] }))
    for (const step of steps) placed.set(step.checkpoint.seq, step)
    const partsFrom = shared === 0 ? null : chain[shared - 1]!.seq
    return {
      tip: tip.leaf,
      current: tip === currentTip,
      ...(tip.label === undefined ? {} : { label: tip.label }),
      partsFrom,
      steps
    }
  }
  const main = place(currentTip)
  for (const tip of [...live].sort((a, b) => a.leaf - b.leaf)) {
    if (tip === currentTip || tip.leaf === currentTip.leaf) continue
    const branch = place(tip)
    if (branch.partsFrom === null) atStart.push(branch)
    else placed.get(branch.partsFrom)!.sideBranches.push(branch)
  }
  return {
    main,
    atStart,
    pruned: tree.branches.filter((branch) => branch.pruned === true).map((branch) => branch.leaf)
  }
}

/** A line of the picture, as a list shows it. */
export interface PictureRow {
  readonly kind: "checkpoint" | "tip"
  /** The checkpoint's seq, or the tip's leaf. */
  readonly seq: number
  /** 0 on the current branch; one more for each parting on the way from it. */
  readonly depth: number
  /** The branch the row is on: a switch from this row goes to its tip. */
  readonly branch: PictureBranch
  /** The checkpoint, for a checkpoint row. */
  readonly checkpoint?: PictureCheckpoint
  /** The first row of a side branch: where it parts. */
  readonly parts: boolean
  /** The one row where the session is: the current branch's tip. */
  readonly here: boolean
  /** A folded branch's tip row: how many of its checkpoints (and its side branches' rows) are not shown. */
  readonly folded?: number
}

/** How many rows a branch has, unfolded: its checkpoints, its side branches', and its tip. */
const rowsIn = (branch: PictureBranch): number =>
  branch.steps.reduce((sum, step) => sum + 1 + step.sideBranches.reduce((side, each) => side + rowsIn(each), 0), 1)

/**
 * The rows of the picture in the order shown: the branches parting at the start, then the current
 * branch with each side branch right after the checkpoint it parts from. A side branch whose tip
 * is in `folded` shows its tip row only.
 */
export const pictureRows = (picture: TreePicture, folded: ReadonlySet<number> = new Set()): Array<PictureRow> => {
  const rows: Array<PictureRow> = []
  const branchRows = (branch: PictureBranch, depth: number) => {
    const side = !branch.current
    if (side && folded.has(branch.tip)) {
      rows.push({ kind: "tip", seq: branch.tip, depth, branch, parts: true, here: false, folded: rowsIn(branch) - 1 })
      return
    }
    branch.steps.forEach((step, index) => {
      rows.push({ kind: "checkpoint", seq: step.checkpoint.seq, depth, branch, checkpoint: step.checkpoint, parts: side && index === 0, here: false })
      for (const each of step.sideBranches) branchRows(each, depth + 1)
    })
    rows.push({ kind: "tip", seq: branch.tip, depth, branch, parts: side && branch.steps.length === 0, here: branch.current })
  }
  for (const branch of picture.atStart) branchRows(branch, 1)
  branchRows(picture.main, 0)
  return rows
}
