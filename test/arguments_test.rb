# frozen_string_literal: true

require_relative "test_helper"

# Only JSON-native arguments are accepted; anything else is refused at
# enqueue with the path of the offending value, and nothing is written.
class ArgumentsTest < SolidJobsTest
  def assert_refused(args, pattern)
    error = assert_raises(ArgumentError) { AnyArgumentsTask.enqueue(*args) }
    assert_match pattern, error.message
    assert_equal 0, redis.llen(key("channel:default")), "nothing may be written"
  end

  def test_refuses_values_json_cannot_carry_unchanged
    assert_refused([:sym], /arguments\[0\] is a Symbol/)
    assert_refused([1, Time.now], /arguments\[1\] is a Time/)
    assert_refused([Object.new], /arguments\[0\] is a Object/)
    assert_refused([Float::NAN], /arguments\[0\] is NaN/)
    assert_refused([Float::INFINITY], /arguments\[0\] is inf/)
    assert_refused([2**70], /outside the 64-bit range/)
    assert_refused(["\xFF".b], /not valid UTF-8/)
    assert_refused([1..2], /Range/)
  end

  def test_names_the_path_inside_nested_structures
    assert_refused([{"a" => [1, {"b" => :c}]}], /arguments\[0\]\["a"\]\[1\]\["b"\] is a Symbol/)
    assert_refused([{x: 1}], /Symbol key :x/)
    assert_refused([{1 => 1}], /key 1 \(Integer\)/)
  end

  def test_enqueue_many_validates_every_job_before_writing_any
    error = assert_raises(ArgumentError) { AnyArgumentsTask.enqueue_many([[1], [2], [:bad]]) }
    assert_match(/arguments of job 2\[0\] is a Symbol/, error.message)
    assert_equal 0, redis.llen(key("channel:default"))
  end

  def test_accepts_json_native_values_and_round_trips_them
    args = [nil, true, false, 42, -7, 2**63 - 1, 1.5, "text ✓", [1, [2]], {"k" => {"nested" => [nil]}, "z" => 1, "a" => 2}]
    id = AnyArgumentsTask.enqueue(*args)
    envelope = JSON.parse(redis.lindex(key("channel:default"), 0))
    assert_equal id, envelope["id"]
    assert_equal args, envelope["arguments"]
    assert_equal %w[z a], envelope["arguments"].last.keys.last(2), "hash key order is preserved"
  end

  def test_refuses_bad_delays_and_times
    assert_raises(ArgumentError) { AnyArgumentsTask.enqueue_after(-1, 1) }
    assert_raises(ArgumentError) { AnyArgumentsTask.enqueue_after(Float::NAN, 1) }
    assert_raises(ArgumentError) { AnyArgumentsTask.schedule_at("tomorrow", 1) }
    assert_raises(ArgumentError) { LedgerTask.enqueue_many([1, 2]) }
  end
end
