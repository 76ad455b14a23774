# frozen_string_literal: true

require_relative "test_helper"

# The record of recently completed ids that lets Console#find tell
# "completed" from "unknown" (ack.lua, one list element per batch). Run
# here with a small bound (ARGV[2]) so the trimming is seen: the list keeps
# the newest `keep` completions plus at most one batch, whatever the batch
# sizes, and a reset counter cannot make it grow without bound.
class CompletedRecordTest < SolidJobsTest
  # As solid_core sends it (scripts.rs): the prelude, then the script.
  LUA = File.expand_path("../crates/solid_core/lua", __dir__)
  ACK = "#{File.read(File.join(LUA, "prelude.lua"))}\n#{File.read(File.join(LUA, "ack.lua"))}".freeze

  def setup
    super
    @claims = key("claims:n1")
    @list = key("completed")
    @processed = key("metric:processed")
  end

  # Completes `ids` as one batch (each claimed first, as a node would).
  def ack(ids, keep)
    args = ids.each_with_index.flat_map { |id, i| ["#{id}-t#{i}", id] }
    args.each_slice(2) { |token, id| redis.hset(@claims, token, id) }
    keys = [@claims, key("attempts"), @processed, key("metric:stale"), key("jobs"), key("acked:n1"), @list]
    redis.eval(ACK, keys: keys, argv: ["0", keep.to_s, *args])
  end

  # Newest first: batches are newest first, a batch's ids in completion order.
  def kept_ids = redis.lrange(@list, 0, -1).flat_map { |e| e.split(" ").drop(1).reverse }

  def test_keeps_the_newest_completions_plus_at_most_one_batch
    n = 0
    largest = 0
    [1, 7, 3, 1, 12, 2, 5, 1, 1, 9, 1, 1].each do |size|
      largest = [largest, size].max
      ack(Array.new(size) { "j#{n += 1}" }, 10)
      kept = kept_ids
      assert_equal "j#{n}", kept.first, "newest first"
      assert_operator kept.size, :>=, [n, 10].min, "at least the newest 10 completions are kept"
      # The oldest batch kept may reach past the bound, by less than a batch.
      assert_operator kept.size, :<, 10 + largest, "at most the bound plus one batch"
      assert_equal kept.map { |id| id[1..].to_i }.sort.reverse, kept.map { |id| id[1..].to_i }
    end
  end

  def test_a_reset_counter_does_not_let_the_list_grow
    ack(%w[a b c], 10)
    redis.set(@processed, 0)
    ack(%w[d], 10)
    assert_equal %w[d], kept_ids, "elements numbered above the counter are dropped"
    20.times { |i| ack(["e#{i}"], 10) }
    assert_equal 10, kept_ids.size
  end

  # With a bound of 64 the oldest element is looked at once per 4
  # completions (1/16 of the bound), not on every call; a counter reset to
  # 0 is looked at at once.
  def test_the_bound_is_looked_at_once_per_sixteenth_and_a_reset_at_once
    n = 0
    40.times do
      ack(Array.new(3) { "k#{n += 1}" }, 64)
      assert_operator kept_ids.size, :<, 64 + 4 + 3, "at most the bound, 1/16 of it and one batch"
    end
    redis.set(@processed, 0)
    ack(%w[z], 64)
    assert_equal %w[z], kept_ids, "a reset counter is noticed by the first batch after it"
  end

  def test_console_find_reads_the_batches
    configure_solid_jobs
    ack(%w[x1 x2 x3], 100)
    ack(%w[y1], 100)
    console = SolidJobs::Console.new
    assert_equal 2, console.find("x2")["completions_since"], "x3 and y1 completed after it"
    assert_equal 0, console.find("y1")["completions_since"]
    assert_equal "completed", console.find("x1")["state"]
    assert_nil console.find("never-enqueued")
  end
end
