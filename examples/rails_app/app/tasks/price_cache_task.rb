# frozen_string_literal: true

# Holds a Mutex in a class-level instance variable, like code built on a
# connection pool: it cannot run in a Ractor. Enqueued with an argument that
# is not Ractor-shareable (a mutable String or Array), its jobs go to the
# warm pool: a warm worker process (script/warm_worker.rb) runs them.
class PriceCacheTask
  include SolidJobs::Task

  @lock = Mutex.new
  @prices = {}
  class << self
    attr_reader :lock, :prices
  end

  def execute_task(skus)
    self.class.lock.synchronize { skus.each { |sku| self.class.prices[sku] = sku.bytes.sum % 100 } }
    DemoLedger.record("PriceCacheTask: cached #{skus.size} prices (warm pool)")
  end
end
